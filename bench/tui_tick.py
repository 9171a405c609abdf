"""What the live TUI costs, measured in a real terminal (tmux), early and late in a long run.

    .venv/bin/python bench/tui_tick.py [--steps 300] [--pace 0.2] [--repeats 3] [--idle-steps 1000]

For each repeat: a real run of --steps steps is started headless (its worker detached), then the real
app (`checkpoint-tui --stats FILE`) is opened on it inside tmux at 180x45, so terminal output is paid
for. While the run goes on, the app's own CPU time (all its threads: UI, ledger, supervisor, Temporal
client) is read from /proc over steps 10-100 and the last 90 steps, and the app writes one line per
refresh: build + apply time, ledger statements and rows, Temporal requests, lines painted. Then the
same app is measured idle on a finished run of --idle-steps steps (made once, reused), from when it
has read and painted that run's history (the time and CPU that took are printed apart).
Targets: live CPU <= 5 % of one core and tick median <= 15 ms in both phases; idle CPU <= 3 %."""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from _common import OUT_DIR, bench_home, write_result  # noqa: E402
from checkpoint_tui.ledger import queries  # noqa: E402
from checkpoint_tui.ledger.store import connect  # noqa: E402
from checkpoint_tui.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "checkpoint_tui"]
SIZE = (180, 45)
SETTLE_STEPS = 10  # the early phase starts after the app has loaded and caught up


def home_flags(home: Settings) -> list[str]:
    return ["--home", str(home.home), *(["--temporal-address", home.temporal_address] if home.temporal_address else [])]


def cli(home: Settings, *args: str, timeout: float = 3600) -> str:
    out = subprocess.run([*CLI, *home_flags(home), *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"checkpoint-tui {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


class TmuxApp:
    """The real app in a real terminal; its pid is the tmux pane's (the command is exec'd)."""

    def __init__(self, home: Settings, stats: Path, name: str) -> None:
        self.name = name
        cmd = f"exec {' '.join(CLI)} {' '.join(home_flags(home))} --stats {stats}"
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", name, "-x", str(SIZE[0]), "-y", str(SIZE[1]), cmd], check=True
        )
        pid = subprocess.run(["tmux", "display", "-p", "-t", name, "#{pane_pid}"], capture_output=True, text=True)
        self.proc = psutil.Process(int(pid.stdout.strip()))

    def cpu(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    def quit(self) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "q"], check=False)
        try:
            self.proc.wait(15)
        except psutil.TimeoutExpired:
            self.proc.kill()
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


def read_ticks(stats: Path, start: float, end: float) -> list[dict]:
    ticks = [json.loads(line) for line in stats.read_text().splitlines() if line.strip()]
    return [t for t in ticks if start <= t["at"] <= end]


def wait_steps(conn, run_id: str, n: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while queries.count_completed(conn, run_id) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"{run_id} did not reach step {n} in {timeout:.0f} s")
        time.sleep(0.1)


def phase(app: TmuxApp, stats: Path, conn, run_id: str, first: int, last: int) -> dict:
    wait_steps(conn, run_id, first)
    cpu0, t0 = app.cpu(), time.time()
    wait_steps(conn, run_id, last)
    cpu1, t1 = app.cpu(), time.time()
    ticks = read_ticks(stats, t0, t1)

    def med(key: str, scale: float = 1.0) -> float | None:
        return statistics.median(t[key] * scale for t in ticks) if ticks else None

    return {
        "steps": [first, last],
        "seconds": t1 - t0,
        "cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "ticks": len(ticks),
        "tick_ms": statistics.median((t["poll_s"] + t["apply_s"]) * 1000 for t in ticks) if ticks else None,
        "apply_ms": med("apply_s", 1000),
        "sql_per_tick": med("sql"),
        "rows_per_tick": med("rows"),
        "requests_per_tick": med("temporal"),
        "lines_per_tick": med("lines"),
    }


def live_repeat(home: Settings, i: int, steps: int, pace: float, span: int) -> dict:
    run_id = cli(home, "start", "--steps", str(steps), "--pace", str(pace))
    stats = OUT_DIR / f"tui-stats-{i}.jsonl"
    stats.unlink(missing_ok=True)
    app = TmuxApp(home, stats, f"tuibench{i}")
    try:
        conn = connect(home.ledger)
        first = min(SETTLE_STEPS, max(1, steps - 2 * span))
        early = phase(app, stats, conn, run_id, first, first + span)
        late = phase(app, stats, conn, run_id, steps - span, steps)
    finally:
        app.quit()
    return {"run_id": run_id, "early": early, "late": late}


def idle(home: Settings, steps: int, seconds: float) -> dict:
    conn = connect(home.ledger)
    done = [r for r in queries.recent_runs(conn) if r.total_steps == steps and r.status == "completed"]
    if not done:
        print(f"making a finished {steps}-step run (pace 0), once…", flush=True)
        run_id = cli(home, "start", "--steps", str(steps), "--pace", "0")
        wait_steps(conn, run_id, steps, timeout=3600)
        time.sleep(1.0)  # its last activity (finish_run) writes the run row's status
    stats = OUT_DIR / "tui-stats-idle.jsonl"
    stats.unlink(missing_ok=True)
    app = TmuxApp(home, stats, "tuibenchidle")
    try:
        opened, deadline = time.monotonic(), time.monotonic() + 300
        while not caught_up(stats):  # idle means after the app has read the run's history and painted it
            if time.monotonic() > deadline:
                raise SystemExit("the app did not catch up with the finished run in 300 s")
            time.sleep(0.5)
        catch_up_s, load_cpu = time.monotonic() - opened, app.cpu()
        time.sleep(min(3.0, seconds))  # settle
        cpu0, t0 = app.cpu(), time.time()
        time.sleep(seconds)
        cpu1, t1 = app.cpu(), time.time()
        ticks = read_ticks(stats, t0, t1)
    finally:
        app.quit()
    return {
        "cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "tick_ms": statistics.median((t["poll_s"] + t["apply_s"]) * 1000 for t in ticks) if ticks else None,
        "sql_per_tick": statistics.median(t["sql"] for t in ticks) if ticks else None,
        "seconds": t1 - t0,
        "catch_up_s": catch_up_s,  # opening the finished run: history read and painted
        "catch_up_cpu_s": load_cpu,
    }


def caught_up(stats: Path, quiet: int = 6) -> bool:
    """The last `quiet` refreshes asked Temporal nothing and painted no table line."""
    if not stats.exists():
        return False
    ticks = [json.loads(line) for line in stats.read_text().splitlines()[-quiet:] if line.strip()]
    return len(ticks) == quiet and all(t["temporal"] == 0 and t["lines"] == 0 for t in ticks)


def report(result: dict) -> None:
    head = f"{'phase':<8} {'CPU % (median)':>15} {'tick ms':>8} {'sql':>5} {'rows':>5} {'req':>5} {'lines':>6}"
    print(head + "   per repeat (CPU/tick)")
    for name in ("early", "late"):
        rs = [r[name] for r in result["repeats"]]
        cpu = statistics.median(r["cpu_pct"] for r in rs)
        tick = statistics.median(r["tick_ms"] for r in rs if r["tick_ms"] is not None)
        sql = statistics.median(r["sql_per_tick"] for r in rs)
        rows = statistics.median(r["rows_per_tick"] for r in rs)
        req = statistics.median(r["requests_per_tick"] for r in rs)
        lines = statistics.median(r["lines_per_tick"] for r in rs)
        each = ", ".join(f"{r['cpu_pct']:.1f}%/{r['tick_ms']:.1f}ms" for r in rs)
        print(f"{name:<8} {cpu:>15.2f} {tick:>8.2f} {sql:>5.0f} {rows:>5.0f} {req:>5.1f} {lines:>6.0f}   {each}")
        result[f"{name}_cpu_pct"], result[f"{name}_tick_ms"] = cpu, tick
    i = result["idle"]
    print(f"{'idle':<8} {i['cpu_pct']:>15.2f} {i['tick_ms'] or 0:>8.2f} {i['sql_per_tick'] or 0:>5.0f}")
    print(f"opening the finished run: caught up in {i['catch_up_s']:.1f} s, {i['catch_up_cpu_s']:.2f} s of CPU")
    print("targets: live CPU <= 5 %, tick <= 15 ms in both phases; idle CPU <= 3 %")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--pace", type=float, default=0.2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--idle-steps", type=int, default=1000)
    p.add_argument("--idle-seconds", "--seconds", type=float, default=20.0)
    p.add_argument("--phase-steps", type=int, default=90, help="steps measured early and late (default 90)")
    p.add_argument("--temporal-address", help="an existing server (default: the bench home's own dev server)")
    args = p.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("bench/tui_tick.py runs the app in tmux: apt-get install tmux")
    home = bench_home("tui-pty", args.temporal_address)
    try:
        repeats = []
        for i in range(args.repeats):
            repeats.append(live_repeat(home, i, args.steps, args.pace, args.phase_steps))
            early, late = repeats[-1]["early"]["cpu_pct"], repeats[-1]["late"]["cpu_pct"]
            print(f"repeat {i + 1}: early {early:.1f} % · late {late:.1f} % of a core", flush=True)
        result = {"steps": args.steps, "pace": args.pace, "size": SIZE, "repeats": repeats}
        result["idle"] = idle(home, args.idle_steps, args.idle_seconds)
    finally:
        cli(home, "stop", timeout=60)
    report(result)
    print(f"wrote {write_result('tui_tick', result)}")


if __name__ == "__main__":
    main()
