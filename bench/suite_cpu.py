"""Where the suite's CPU goes: runs a pytest command (default: the suite as `make test` runs it) while
sampling every process four times a second, and puts each process's CPU down to the test its xdist
worker was running (tests/conftest.py names it in CHECKPOINT_TESTS_TRACE_DIR). A process is a worker's
when that worker is its ancestor or its environment names it (PYTEST_XDIST_WORKER: daemons the kernel
re-parented). A child's CPU is counted while it lives and, once reaped, through its parent's children
times less what was already seen of it (its own and its reaped children's). Prints the machine's CPU
beside it, the CPU by kind of process (dev servers, our workers, node, the CLI...) with how many of
each ran, and the costliest test files (each with its costliest kinds) and tests. The sampling costs
CPU of its own: the suite's wall time under it is not the suite's. Run it on an otherwise idle machine:

    .venv/bin/python bench/suite_cpu.py [--top 30] [-- pytest args...]
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["-n", "6", "--dist", "worksteal", "-p", "no:langsmith_plugin", "-p", "no:anyio", "-q"]


def stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, own CPU s, reaped children's CPU s) from /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    own = (int(fields[11]) + int(fields[12])) / TICK
    kids = (int(fields[13]) + int(fields[14])) / TICK
    return ppid, own, kids


def machine_cpu() -> float:
    """CPU seconds the machine spent (all cores, user + system), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    return (int(fields[0]) + int(fields[1]) + int(fields[2])) / TICK


def environ_worker(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"PYTEST_XDIST_WORKER="):
            return item.split(b"=", 1)[1].decode()
    return None


# What a process is, by the first of these its command line holds (after the dev server and node, which
# its program names); a Python process that matches none is a user's worker or a helper
KINDS = (
    (("checkpoint_tui.worker", "loop_worker"), "our worker"),
    (("preload",), "preloader"),
    ((" supervise",), "supervisor"),
    (("cli_zygote", "checkpoint_tui"), "CLI"),
    (("postgres",), "postgres"),
    (("nginx",), "nginx"),
    (("execnet", "pytest", "xdist"), "pytest worker"),
)


def kind(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text, program = b" ".join(cmd).decode(errors="replace"), cmd[0].decode(errors="replace")
    if "temporal" in program and "start-dev" in text:
        return "dev server"
    if program.endswith("node"):
        return "node"
    if (found := next((name for needles, name in KINDS if any(n in text for n in needles)), None)) is not None:
        return found
    return "user worker / other python" if "python" in program else Path(program).name or "?"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    trace = Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    env = {**os.environ, "CHECKPOINT_TESTS_TRACE_DIR": str(trace)}
    cmd = [sys.executable, "-m", "pytest", *(args.pytest_args or DEFAULT)]
    started, machine0 = time.monotonic(), machine_cpu()
    suite = subprocess.Popen(cmd, cwd=ROOT, env=env)
    seen: dict[int, tuple[str, str, float, float, int]] = {}  # pid -> (owner, kind, own, kids, ppid)
    by_test: collections.Counter[str] = collections.Counter()
    by_kind: collections.Counter[str] = collections.Counter()
    procs_by_kind: collections.Counter[str] = collections.Counter()  # processes seen (alive at a sample)
    by_file_kind: collections.Counter[tuple[str, str]] = collections.Counter()
    workers: dict[int, str] = {}  # xdist worker pid -> its id
    while suite.poll() is None:
        current = {}
        for f in trace.iterdir():
            try:
                pid_s, nodeid = f.read_text().split(" ", 1)
            except (OSError, ValueError):
                continue
            workers[int(pid_s)] = f.name
            current[f.name] = nodeid
        now: dict[int, tuple[int, float, float]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and (st := stat(int(entry))) is not None:
                now[int(entry)] = st
        gone_by_parent: collections.Counter[int] = collections.Counter()
        for pid in [p for p in seen if p not in now]:
            gone_by_parent[seen[pid][4]] += seen[pid][2] + seen[pid][3]  # reaped: all of it to its parent
            del seen[pid]
        for pid, (ppid, own, kids) in now.items():
            if pid not in seen:
                owner = workers.get(pid)
                walk = ppid
                while owner is None and walk > 1 and walk in now:
                    owner = workers.get(walk) or (seen[walk][0] if walk in seen and seen[walk][0] else None)
                    walk = now[walk][0]
                owner = owner or environ_worker(pid) or ""
                seen[pid] = (owner, kind(pid), 0.0, 0.0, ppid)
                if owner:
                    procs_by_kind[seen[pid][1]] += 1
            owner, what, own0, kids0, _ = seen[pid]
            start_up = not owner and pid in workers
            if start_up:  # an xdist worker seen before it named its first test: what it spent until now
                owner, what = workers[pid], "pytest worker"
            delta = own - own0 + max(0.0, kids - kids0 - gone_by_parent.get(pid, 0.0))
            seen[pid] = (owner, what, own, kids, ppid)
            if owner and delta > 0:
                test = "(start-up and collection)" if start_up else current.get(owner, "(between tests)")
                by_test[test] += delta
                by_kind[what] += delta
                by_file_kind[test.split("::")[0], what] += delta
        time.sleep(0.25)
    wall, machine = time.monotonic() - started, machine_cpu() - machine0
    total = sum(by_test.values())
    files: collections.Counter[str] = collections.Counter()
    for test, cpu in by_test.items():
        files[test.split("::")[0]] += cpu
    print(
        f"\nwall {wall:.0f} s · the machine's CPU {machine:.0f} s ({machine / wall:.2f} cores) · put down to tests"
        f" {total:.0f} s"
    )
    print("\nby kind of process (processes seen at a sample; one that lived under 0.25 s may be missed):")
    for what, cpu in by_kind.most_common():
        n = procs_by_kind[what]
        print(f"  {cpu:7.1f} s  {what}" + (f"  ({n} processes, {cpu / n:.2f} s each)" if n else ""))
    print(f"\ncostliest {args.top} test files:")
    for f, cpu in files.most_common(args.top):
        kinds = sorted(((c, k) for (ff, k), c in by_file_kind.items() if ff == f and c >= 1), reverse=True)
        print(f"  {cpu:7.1f} s  {f}  (" + ", ".join(f"{k} {c:.0f}" for c, k in kinds[:4]) + ")")
    print(f"\ncostliest {args.top} tests:")
    for t, cpu in by_test.most_common(args.top):
        print(f"  {cpu:7.1f} s  {t}")
    return suite.returncode


if __name__ == "__main__":
    sys.exit(main())
