"""What the live TUI costs, measured in a real terminal (tmux), early and late in a long run, with the
tricks of tui/render/ and on Textual's stock paths (CHECKPOINT_TUI_STOCK=all) side by side.

    .venv/bin/python bench/tui_tick.py [--steps 300] [--pace 0.2] [--repeats 3] [--idle-steps 1000]
    .venv/bin/python bench/tui_tick.py --per-trick --steps 120 --phase-steps 40 --repeats 3 --pace 0.3

For each repeat: a real run of --steps steps is started headless (its worker detached), then the real
app (`checkpoint-tui --stats FILE`) is opened on it inside tmux at 180x45, so terminal output is paid
for. While the run goes on, the app's own CPU time (all its threads: UI, ledger, supervisor, Temporal
client) is read from /proc over steps 10-100 and the last 90 steps, and the app writes one line per
refresh: build + apply time, ledger statements and rows, Temporal requests, lines painted. Then the
same app is measured idle on a finished run of --idle-steps steps (made once, reused), from when it
has read and painted that run's history (the time and CPU that took are printed apart).
Each repeat opens the app once per configuration, in turn (so a drift of the machine's speed falls on
all of them alike): with every trick, and on the stock path (--no-stock: the tricks only). With
--per-trick also with each trick switched off alone, and a table of what each buys: the points of CPU
it saves, early, late and idle (idle also counts the app's wake-ups: voluntary context switches/s).
Targets: live CPU <= 5 % of one core and tick median <= 15 ms in both phases; idle CPU <= 3 %."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
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
from checkpoint_tui.settings import TUI_STOCK_ENV, Settings  # noqa: E402

# The tricks of tui/render/ (its switch.TRICKS; not imported: that would load Textual here)
TRICKS = ("painted-lines", "light-scrollbar", "scroll-update")
WITH_TRICKS, STOCK = "tricks", "stock"

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "checkpoint_tui"]
SIZE = (180, 45)
TICK_WAIT_S = 30.0  # the longest a phase waits for the app to refresh once
SETTLE_STEPS = 10  # the early phase starts after the app has loaded and caught up


def home_flags(home: Settings) -> list[str]:
    return ["--home", str(home.home), *(["--temporal-address", home.temporal_address] if home.temporal_address else [])]


def cli(home: Settings, *args: str, timeout: float = 3600) -> str:
    out = subprocess.run([*CLI, *home_flags(home), *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"checkpoint-tui {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def stock_value(config: str) -> str:
    """The CHECKPOINT_TUI_STOCK value of a configuration: every trick on, all off, or one trick off."""
    return {WITH_TRICKS: "", STOCK: "all"}.get(config, config)


class TmuxApp:
    """The real app in a real terminal; its pid is the tmux pane's (the command is exec'd). The tmux
    server may be older than this process: the switch goes on the command line, not in tmux's env."""

    refresh: float | None = None  # the app's --refresh (None: its default)

    def __init__(self, home: Settings, stats: Path, name: str, config: str = WITH_TRICKS) -> None:
        self.name = f"{name}-{os.getpid()}"  # another bench on the same tmux server keeps its sessions
        cmd = f"exec env {TUI_STOCK_ENV}={stock_value(config)} {' '.join(CLI)} {' '.join(home_flags(home))}"
        cmd += f" --stats {stats}" + (f" --refresh {self.refresh}" if self.refresh is not None else "")
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", str(SIZE[0]), "-y", str(SIZE[1]), cmd], check=True
        )
        pid = subprocess.run(["tmux", "display", "-p", "-t", self.name, "#{pane_pid}"], capture_output=True, text=True)
        self.proc = psutil.Process(int(pid.stdout.strip()))

    def cpu(self) -> float:
        t = self.proc.cpu_times()
        return t.user + t.system

    def wakeups(self) -> dict[int, int]:
        """Voluntary context switches by thread (each is a sleep that ended), from /proc: the process's
        own status counts its main thread only."""
        counts = {}
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            with contextlib.suppress(OSError):
                for line in (task / "status").read_text().splitlines():
                    if line.startswith("voluntary_ctxt_switches:"):
                        counts[int(task.name)] = int(line.split()[1])
        return counts

    def quit(self) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "q"], check=False)
        try:
            self.proc.wait(15)
        except psutil.TimeoutExpired:
            self.proc.kill()
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False, capture_output=True)


def read_ticks(stats: Path, start: float, end: float) -> list[dict]:
    if not stats.exists():  # no refresh yet
        return []
    ticks = [json.loads(line) for line in stats.read_text().splitlines() if line.strip()]
    return [t for t in ticks if start <= t["at"] <= end]


def first_tick(stats: Path, timeout: float = 120) -> None:
    """The app is up: it has applied its first View."""
    deadline = time.monotonic() + timeout
    while not (stats.exists() and stats.stat().st_size):
        if time.monotonic() > deadline:
            raise SystemExit(f"the app wrote no refresh to {stats} in {timeout:.0f} s")
        time.sleep(0.1)


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
    # A phase ends at its last step and at least one refresh of the app inside it: a short phase on a
    # loaded machine can otherwise pass between two refreshes and measure nothing.
    deadline = time.monotonic() + TICK_WAIT_S
    while not read_ticks(stats, t0, time.time()) and time.monotonic() < deadline:
        time.sleep(0.05)
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


def live_repeat(home: Settings, i: int, config: str, steps: int, pace: float, span: int) -> dict:
    run_id = cli(home, "start", "--steps", str(steps), "--pace", str(pace))
    stats = OUT_DIR / f"tui-stats-{config}-{i}.jsonl"
    stats.unlink(missing_ok=True)
    app = TmuxApp(home, stats, f"tuibench{i}", config)
    try:
        first_tick(stats)
        conn = connect(home.ledger)
        first = min(SETTLE_STEPS, max(1, steps - 2 * span))
        early = phase(app, stats, conn, run_id, first, first + span)
        late = phase(app, stats, conn, run_id, steps - span, steps)
    finally:
        app.quit()
    return {"config": config, "run_id": run_id, "early": early, "late": late}


def idle_run(home: Settings, steps: int) -> str:
    """The finished run the idle phase opens: the app shows the latest run, so the latest must be it."""
    conn = connect(home.ledger)
    latest = queries.recent_runs(conn, limit=1)
    if latest and latest[0].total_steps == steps and latest[0].status == "completed":
        return latest[0].run_id
    print(f"making a finished {steps}-step run (pace 0)…", flush=True)
    run_id = cli(home, "start", "--steps", str(steps), "--pace", "0")
    wait_steps(conn, run_id, steps, timeout=3600)
    deadline = time.monotonic() + 60
    while queries.recent_runs(conn, limit=1)[0].status != "completed":  # finish_run writes the run's status
        if time.monotonic() > deadline:
            raise SystemExit(f"{run_id} did not complete")
        time.sleep(0.2)
    return run_id


def idle(home: Settings, config: str, seconds: float) -> dict:
    stats = OUT_DIR / f"tui-stats-idle-{config}.jsonl"
    stats.unlink(missing_ok=True)
    app = TmuxApp(home, stats, "tuibenchidle", config)
    try:
        opened, deadline = time.monotonic(), time.monotonic() + 300
        while not caught_up(stats):  # idle means after the app has read the run's history and painted it
            if time.monotonic() > deadline:
                raise SystemExit("the app did not catch up with the finished run in 300 s")
            time.sleep(0.5)
        catch_up_s, load_cpu = time.monotonic() - opened, app.cpu()
        time.sleep(min(3.0, seconds))  # settle
        cpu0, wake0, t0 = app.cpu(), app.wakeups(), time.time()
        time.sleep(seconds)
        cpu1, wake1, t1 = app.cpu(), app.wakeups(), time.time()
        ticks = read_ticks(stats, t0, t1)
    finally:
        app.quit()
    woke = sum(n - wake0.get(tid, 0) for tid, n in wake1.items())  # a thread that ended is left out
    return {
        "config": config,
        "cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
        "wakeups_per_s": woke / (t1 - t0),
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


PHASE_KEYS = ("cpu_pct", "tick_ms", "sql_per_tick", "rows_per_tick", "requests_per_tick", "lines_per_tick")


def summary(repeats: list[dict], idles: list[dict]) -> dict:
    """Medians over the repeats of one configuration."""
    out: dict = {}
    for name in ("early", "late"):
        rs = [r[name] for r in repeats]
        for key in PHASE_KEYS:
            values = [r[key] for r in rs if r[key] is not None]
            out[f"{name}_{key}"] = statistics.median(values) if values else None
    for key in ("cpu_pct", "wakeups_per_s", "tick_ms", "sql_per_tick", "catch_up_s", "catch_up_cpu_s"):
        values = [i[key] for i in idles if i[key] is not None]
        out[f"idle_{key}"] = statistics.median(values) if values else None
    return out


def report(result: dict) -> None:
    configs = result["configs"]
    m = {k: v or 0 for k, v in configs[WITH_TRICKS]["median"].items()}
    head = f"{'phase':<8} {'CPU % (median)':>15} {'tick ms':>8} {'sql':>5} {'rows':>5} {'req':>5} {'lines':>6}"
    print("with the tricks:\n" + head + "   per repeat (CPU/tick)")
    for name in ("early", "late"):
        rs = [r[name] for r in configs[WITH_TRICKS]["repeats"]]
        each = ", ".join(f"{r['cpu_pct']:.1f}%/{r['tick_ms'] or 0:.1f}ms" for r in rs)
        cpu, tick, sql, rows, req, lines = (m[f"{name}_{k}"] for k in PHASE_KEYS)
        print(f"{name:<8} {cpu:>15.2f} {tick:>8.2f} {sql:>5.0f} {rows:>5.0f} {req:>5.1f} {lines:>6.0f}   {each}")
        result[f"{name}_cpu_pct"], result[f"{name}_tick_ms"] = cpu, tick
    if result["idle"] is not None:
        print(
            f"{'idle':<8} {m['idle_cpu_pct']:>15.2f} {m['idle_tick_ms']:>8.2f} {m['idle_sql_per_tick']:>5.0f}"
            f"   {m['idle_wakeups_per_s']:.0f} wake-ups/s"
        )
        print(
            f"opening the finished run: caught up in {m['idle_catch_up_s']:.1f} s, {m['idle_catch_up_cpu_s']:.2f} s CPU"
        )
    if len(configs) > 1:
        print()
        print_configs(configs)
    print("targets: live CPU <= 5 %, tick <= 15 ms in both phases; idle CPU <= 3 % (with the tricks)")


def print_configs(configs: dict) -> None:
    """CPU % of a core per configuration, and the points a trick saves (its row's minus the tricks' row)."""
    base = {k: v or 0 for k, v in configs[WITH_TRICKS]["median"].items()}
    phases = ("early", "late", "idle") if configs[WITH_TRICKS]["idle"] else ("early", "late")
    cols = f"{'early %':>8} {'late %':>8}" + (f" {'idle %':>8} {'wake/s':>7}" if "idle" in phases else "")
    print(f"{'configuration':<30} {cols}   points saved: {' / '.join(phases)}")
    for config, data in configs.items():
        m = {k: v or 0 for k, v in data["median"].items()}
        label = {WITH_TRICKS: "all tricks", STOCK: "stock Textual (all off)"}.get(config, f"{config} off")
        saved = ""
        if config != WITH_TRICKS:
            saved = " / ".join(f"{m[f'{k}_cpu_pct'] - base[f'{k}_cpu_pct']:+.2f}" for k in phases)
        row = f"{label:<30} {m['early_cpu_pct']:>8.2f} {m['late_cpu_pct']:>8.2f}"
        if "idle" in phases:
            row += f" {m['idle_cpu_pct']:>8.2f} {m['idle_wakeups_per_s']:>7.0f}"
        print(f"{row}   {saved}")
        each = ", ".join(f"{r['early']['cpu_pct']:.1f}/{r['late']['cpu_pct']:.1f}" for r in data["repeats"])
        idles = ", ".join(f"{i['cpu_pct']:.1f}" for i in data["idle"])
        print(f"{'':<30}   per repeat early/late {each}" + (f"; idle {idles}" if idles else ""))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--pace", type=float, default=0.2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--idle-steps", type=int, default=1000)
    p.add_argument("--idle-seconds", "--seconds", type=float, default=20.0)
    p.add_argument("--phase-steps", type=int, default=90, help="steps measured early and late (default 90)")
    p.add_argument("--temporal-address", help="an existing server (default: the bench home's own dev server)")
    p.add_argument(
        "--per-trick",
        nargs="?",
        const=",".join(TRICKS),
        default="",
        metavar="NAMES",
        help="also each trick of tui/render/ switched off alone (default every one; or a comma list)",
    )
    p.add_argument("--no-idle", action="store_true", help="live phases only")
    p.add_argument("--no-stock", action="store_true", help="only the tricks' path, not Textual's stock path too")
    p.add_argument("--refresh", type=float, help="the app's refresh interval in seconds (default: the app's own)")
    args = p.parse_args()
    TmuxApp.refresh = args.refresh
    if shutil.which("tmux") is None:
        raise SystemExit("bench/tui_tick.py runs the app in tmux: apt-get install tmux")
    alone = [name.strip() for name in args.per_trick.split(",") if name.strip()]
    if set(alone) - set(TRICKS):
        raise SystemExit(f"--per-trick: no trick named {', '.join(sorted(set(alone) - set(TRICKS)))}")
    configs = [WITH_TRICKS, *alone, *(() if args.no_stock else (STOCK,))]
    home = bench_home("tui-pty", args.temporal_address)
    runs: dict[str, dict] = {c: {"repeats": [], "idle": []} for c in configs}
    try:
        for i in range(args.repeats):
            for config in configs:  # in turn: a drift of the machine falls on every configuration alike
                live = live_repeat(home, i, config, args.steps, args.pace, args.phase_steps)
                runs[config]["repeats"].append(live)
                print(
                    f"repeat {i + 1} {config}: early {live['early']['cpu_pct']:.1f} %"
                    f" · late {live['late']['cpu_pct']:.1f} % of a core",
                    flush=True,
                )
        if not args.no_idle:
            idle_run(home, args.idle_steps)
        for i in range(0 if args.no_idle else args.repeats):
            for config in configs:
                runs[config]["idle"].append(idle(home, config, args.idle_seconds))
                print(f"idle {i + 1} {config}: {runs[config]['idle'][-1]['cpu_pct']:.1f} %", flush=True)
    finally:
        cli(home, "stop", timeout=60)
    for data in runs.values():
        data["median"] = summary(data["repeats"], data["idle"])
    result = {"steps": args.steps, "pace": args.pace, "size": SIZE, "configs": runs}
    result["repeats"] = runs[WITH_TRICKS]["repeats"]
    result["idle"] = runs[WITH_TRICKS]["idle"][0] if runs[WITH_TRICKS]["idle"] else None
    report(result)
    print(f"wrote {write_result('tui_tick', result)}")


if __name__ == "__main__":
    main()
