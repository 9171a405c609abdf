"""What one lab costs in CPU, by process: runs a checkpoint-tui command (default: a seeded chaos of the
pydantic-ai guarded mailer, 3 kills, in a fresh home of its own) while sampling every process it
starts 20 times a second, and prints the CPU of each kind (the command, its supervisors, the
preloader and its forks, the dev server it starts, our workers, ...), the median of --repeat runs.

    .venv/bin/python bench/lab_cpu.py [--repeat 3] [-- checkpoint-tui args...]

A process is the command's when the command is its ancestor at some sample (the dev server, started
in a session of its own, stays a child of the command that started it until that command exits); its
own CPU is read until it or the command ends (the last sample period of a process that ends is
missed, and so is a process that lives less than one). The home is
run/bench/lab-cpu-N, stopped after each run. Writes run/bench/lab_cpu.json."""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import OUT_DIR, ROOT, write_result  # noqa: E402
from suite_cpu import kind, stat  # noqa: E402

EXAMPLE = ROOT / "examples" / "agents" / "pydantic_ai_mailer" / "worker.py"
DEFAULT = [
    "--worker-cmd",
    f"{sys.executable} {EXAMPLE}",
    "chaos",
    "--workflow",
    "PydanticMailerGuarded",
    "--input",
    '{"turns": 5}',
    "--seed",
    "1",
    "--kills",
    "3",
]
EVERY_S = 0.05


def sample(cmd: list[str]) -> tuple[int, float, dict[str, float]]:
    """(exit code, wall seconds, CPU seconds by kind of process) of one run of `cmd`."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    ours: dict[int, tuple[str, float]] = {}  # pid -> (kind, the most of its own CPU seen)
    while proc.poll() is None:
        now = {int(e): st for e in os.listdir("/proc") if e.isdigit() and (st := stat(int(e))) is not None}
        for pid, (ppid, own, _kids) in now.items():  # own only: a reaped child was counted as itself
            if pid == proc.pid or ppid in ours or pid in ours:
                what = ours[pid][0] if pid in ours else ("command" if pid == proc.pid else kind(pid))
                ours[pid] = (what, max(ours.get(pid, ("", 0.0))[1], own))
        time.sleep(EVERY_S)
    by_kind: collections.Counter[str] = collections.Counter()
    for what, cpu in ours.values():
        by_kind[what] += cpu
    return proc.returncode, time.monotonic() - started, dict(by_kind)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("args", nargs="*", help="checkpoint-tui arguments after --home (default: a pydantic-ai chaos)")
    args = ap.parse_args()
    runs = []
    for n in range(args.repeat):
        home = OUT_DIR / f"lab-cpu-{n}"
        cli = [sys.executable, "-m", "checkpoint_tui", "--home", str(home)]
        try:
            code, wall, cpu = sample([*cli, *(args.args or DEFAULT)])
        finally:
            subprocess.run([*cli, "stop"], capture_output=True, timeout=120, check=False)
        runs.append({"exit": code, "wall_s": round(wall, 2), "cpu_s": {k: round(v, 2) for k, v in cpu.items()}})
        print(f"run {n + 1}: exit {code}, {wall:.1f} s wall, {sum(cpu.values()):.2f} CPU-s", flush=True)
    kinds = sorted({k for r in runs for k in r["cpu_s"]})
    median = {k: statistics.median(r["cpu_s"].get(k, 0.0) for r in runs) for k in kinds}
    total = statistics.median(sum(r["cpu_s"].values()) for r in runs)
    print(f"median of {len(runs)}: {total:.2f} CPU-s")
    for k, v in sorted(median.items(), key=lambda kv: -kv[1]):
        print(f"  {v:6.2f} s  {k}")
    write_result("lab_cpu", {"args": args.args or DEFAULT, "runs": runs, "median_cpu_s": median, "total_s": total})
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
