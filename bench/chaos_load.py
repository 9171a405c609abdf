"""Chaos at load (#52): `chaos --runs N` on examples/user_worker's SendLines with 4 kills, at 16, 64 and 256
runs, each in a fresh home with its own dev server.

    .venv/bin/python bench/chaos_load.py [--runs 16,64,256] [--seed 3] [--repeat 1] [--app 20]

Prints per N: the verdict; every touched run's kill -> its interrupted activity's next attempt (p50, p99,
max, from each run's history: the report's `touched`); the events that did not fire; the command's wall
time; the audit's wall time (from the last run seen closed, the ledger's `ended_at`, to the report
written); CPU: the chaos command with everything it started and reaped (its supervisor, the workers),
that split by role from /proc samples every 0.2 s (chaos itself, which holds the audit; its supervisor;
the workers and their preloader), beside the dev server's; and the chaos command's peak RSS (the
audit's memory is in it); with --app S, the app opened on the home afterwards (every run in its run
list) for S seconds in tmux: its CPU and each refresh's cost. Writes run/bench/chaos_load.json (and each
command's output beside it).
Not to be run beside a test suite: the figures are of a machine doing nothing else."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from _common import OUT_DIR, ROOT, write_result  # noqa: E402
from checkpoint_tui.ops.devserver import recorded  # noqa: E402
from checkpoint_tui.settings import Settings  # noqa: E402

WORKER = f"{sys.executable} {ROOT / 'examples' / 'user_worker' / 'worker.py'}"
INPUT = '{"count": 5, "pace": 0.1}'
KEEP_FAILED = False  # --keep-failed
APP_S = 0.0  # --app


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _role(p: psutil.Process, chaos_pid: int) -> str:
    """What a process under the chaos command is: the command itself, its supervisor, a worker (or its
    preloader or spare), or anything else it started."""
    if p.pid == chaos_pid:
        return "chaos"
    cmd = " ".join(p.cmdline())
    if " supervise " in f" {cmd} ":
        return "supervisor"
    if "preloader.py" in cmd or "worker.py" in cmd:
        return "workers"
    return "dev server" if "start-dev" in cmd else "other"


def _watch(proc: subprocess.Popen) -> tuple[dict[str, float], float]:
    """Until the command ends: each of its processes' CPU by role (sampled every 0.2 s from /proc; a
    process's last sample before it ended counts) and the chaos command's own peak RSS (MiB)."""
    chaos = psutil.Process(proc.pid)
    last: dict[tuple[int, float], tuple[str, float]] = {}
    peak = 0.0
    while proc.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, chaos.memory_info().rss / 2**20)
            for p in [chaos, *chaos.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    t = p.cpu_times()
                    last[(p.pid, p.create_time())] = (_role(p, proc.pid), t.user + t.system)
        time.sleep(0.2)
    split: dict[str, float] = {}
    for role, cpu in last.values():
        split[role] = round(split.get(role, 0.0) + cpu, 1)
    return split, round(peak, 1)


def one(runs: int, seed: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"chaos-load-{runs}-"))
    report = home / "r.json"
    lab = [sys.executable, "-m", "checkpoint_tui", "--home", str(home), "--worker-cmd", WORKER]
    cmd = [*lab, "chaos", "--workflow", "SendLines", "--input", INPUT, "--seed", str(seed), "--kills", "4"]
    cpu0, began = _children_cpu(), time.monotonic()
    proc: subprocess.Popen | None = None
    try:
        with open(home / "out.txt", "w") as log:
            proc = subprocess.Popen(
                [*cmd, "--runs", str(runs), "--json", str(report)], stdout=log, stderr=log, text=True
            )
            split, peak_rss = _watch(proc)
        wall, lab_cpu = time.monotonic() - began, _children_cpu() - cpu0
        out = subprocess.CompletedProcess(proc.args, proc.returncode, (home / "out.txt").read_text(), "")
        ident, _ = recorded(Settings(home=home))
        server_cpu = sum(psutil.Process(ident.pid).cpu_times()[:2]) if ident is not None else float("nan")
        doc = json.loads(report.read_text())
        with sqlite3.connect(home / "run" / "checkpoint.db") as db:
            (last_end,) = db.execute("SELECT MAX(ended_at) FROM runs").fetchone()
        audit_s = report.stat().st_mtime - last_end
        app = app_on(home, lab, APP_S) if APP_S and proc.returncode == 0 else None
    finally:
        subprocess.run([*lab, "stop"], capture_output=True, timeout=120)
        if (home / "out.txt").is_file():  # what it printed, kept beside the figures
            OUT_DIR.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(home / "out.txt", OUT_DIR / f"chaos_load-{runs}.txt")
        if KEEP_FAILED and proc is not None and proc.returncode != 0:  # its ledger and server database, kept
            print(f"kept {home} (exit {proc.returncode})", flush=True)
        else:
            shutil.rmtree(home, ignore_errors=True)
    touched = doc.get("touched") or {}
    verdicts = [line.split("verdict: ")[-1] for line in out.stdout.splitlines() if "verdict: " in line]
    return {
        "runs": runs,
        "exit": out.returncode,
        "verdict": verdicts[-1] if verdicts else None,
        "completed": doc["totals"]["runs_completed"] if doc.get("totals") else None,
        "kills": len(doc["kills"]),
        "not_fired": [f"{n['nemesis']}: {n['why']}" for n in doc["not_fired"]],
        "touched_runs": touched.get("runs"),
        "next_attempt": touched.get("next_attempt"),
        "resumed": touched.get("resumed"),
        "wall_s": round(wall, 1),
        "audit_s": round(audit_s, 1),
        "lab_and_workers_cpu_s": round(lab_cpu, 1),
        "cpu_by_role_s": split,  # sampled: chaos (the audit's share inside it), supervisor, workers, other
        "chaos_peak_rss_mib": peak_rss,
        "dev_server_cpu_s": round(server_cpu, 1),
        "app": app,
    }


def app_on(home: Path, lab: list[str], seconds: float) -> dict:
    """The app opened on the home the chaos left (its run list holds every run), in tmux at 180x45 with
    --stats, for `seconds` from its first refresh: its CPU (% of one core) and each refresh's cost (the
    ledger poll and the View's apply, ms; SQL statements; Temporal requests). A home is one lab's at a
    time: the app cannot open while the chaos runs on it."""
    stats, name = home / "app-stats.jsonl", f"chaos-load-app-{os.getpid()}"
    cmd = "exec " + " ".join(shlex.quote(a) for a in [*lab, "--stats", str(stats)])
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "180", "-y", "45", cmd], check=True)
    try:
        pane = subprocess.run(["tmux", "display", "-p", "-t", name, "#{pane_pid}"], capture_output=True, text=True)
        app = psutil.Process(int(pane.stdout.strip()))
        deadline = time.monotonic() + 60
        while not (stats.exists() and stats.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.1)
        cpu0, began = sum(app.cpu_times()[:2]), time.time()
        time.sleep(seconds)
        cpu = sum(app.cpu_times()[:2]) - cpu0
    finally:
        subprocess.run(["tmux", "send-keys", "-t", name, "q"], check=False)
        time.sleep(2)
        subprocess.run(["tmux", "kill-session", "-t", name], check=False, capture_output=True)
    ticks = [json.loads(line) for line in stats.read_text().splitlines() if line.strip()] if stats.exists() else []
    ticks = [t for t in ticks if t["at"] >= began]
    ms = [1000 * (t["poll_s"] + t["apply_s"]) for t in ticks]
    return {
        "cpu_pct": round(100 * cpu / seconds, 2),
        "refreshes": len(ticks),
        "tick_ms_median": round(statistics.median(ms), 2) if ms else None,
        "tick_ms_max": round(max(ms), 2) if ms else None,
        "sql_max": max((t["sql"] for t in ticks), default=None),
        "temporal_max": max((t["temporal"] for t in ticks), default=None),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", default="16,64,256")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--keep-failed", action="store_true", help="keep the home of a chaos that did not pass")
    p.add_argument("--app", type=float, default=0.0, help="then open the app on the home for this many seconds")
    args = p.parse_args()
    global KEEP_FAILED, APP_S
    KEEP_FAILED, APP_S = args.keep_failed, args.app
    results = []
    for n in [int(x) for x in args.runs.split(",")]:
        for _ in range(args.repeat):
            r = one(n, args.seed)
            results.append(r)
            na = r["next_attempt"] or {}
            print(
                f"runs {n:4}: exit {r['exit']} {r['verdict']} · {r['completed']}/{n} completed · kills {r['kills']} "
                f"· touched {r['touched_runs']} run(s), next attempt p50 {na.get('p50_s')} s p99 {na.get('p99_s')} s "
                f"max {na.get('max_s')} s · wall {r['wall_s']} s · audit {r['audit_s']} s · CPU lab+workers "
                f"{r['lab_and_workers_cpu_s']} s (sampled: {r['cpu_by_role_s']}), dev server {r['dev_server_cpu_s']} s "
                f"· chaos peak RSS {r['chaos_peak_rss_mib']} MiB",
                flush=True,
            )
            if r["app"] is not None:
                a = r["app"]
                print(
                    f"    the app on its {n} runs: CPU {a['cpu_pct']} % over {APP_S:g} s, {a['refreshes']} refreshes, "
                    f"tick median {a['tick_ms_median']} ms max {a['tick_ms_max']} ms, at most {a['sql_max']} SQL "
                    f"statements and {a['temporal_max']} Temporal requests a refresh",
                    flush=True,
                )
            for line in r["not_fired"]:
                print(f"    not fired: {line}")
    print(f"wrote {write_result('chaos_load', {'seed': args.seed, 'input': INPUT, 'results': results})}")


if __name__ == "__main__":
    main()
