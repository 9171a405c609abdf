"""Resume latency after SIGKILL, four ways, in one invocation on one dev server:

  baseline   textbook settings: heartbeat timeout 5 s, first retry 1 s, SDK sticky timeout 10 s,
             workflow task timeout 10 s, no supervisor assistance (the replacement is spawned at once)
  tuned      our timeouts (heartbeat 2 s, retry 100 ms, sticky 1 s, short task timeout), no assistance
  assisted   tuned + the supervisor fails the dead worker's activities by id and resets the sticky queue
  spare      assisted + a warm spare promoted instead of a cold start
  stop       spare, but the worker is SIGSTOPped instead of killed: the supervisor's watchdog must
             notice the hang (stopped >= 1 s), SIGKILL it and promote the spare; not in the default
             --modes (figures: stop -> watchdog kill, stop -> next activity)

    .venv/bin/python bench/resume_latency.py [--steps 24] [--kills 10] [--pace 0.3] [--temporal-address H:P]

Kills (all modes but stop) are `kill_at` faults: the supervisor SIGKILLs the worker while that
step's model call is in flight. Latencies come from durable timestamps (worker_events +
activity_log). For each mode: min / median / max of kill -> killed step restarts and of the
next-step stall (kill -> next step starts, minus the step's own work and timer), and each
median's ratio to the baseline's. For context only: the TypeScript predecessor measured ~12 s kill -> next step."""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import bench_home, connect, summary, write_result  # noqa: E402
from checkpoint_tui.core.runs import start_run, wait_for_run  # noqa: E402
from checkpoint_tui.ledger.faults import FaultSpec  # noqa: E402
from checkpoint_tui.ledger.latency import measure  # noqa: E402
from checkpoint_tui.ledger.queries import activity_logged, first_activity_after  # noqa: E402
from checkpoint_tui.ledger.store import connect as db  # noqa: E402
from checkpoint_tui.loop_worker.shared import timer_ms  # noqa: E402
from checkpoint_tui.ops.procs import send_signal_if_ours  # noqa: E402
from checkpoint_tui.ops.supervisor import Supervisor  # noqa: E402
from checkpoint_tui.settings import Settings  # noqa: E402
from checkpoint_tui.waiting import wait_until  # noqa: E402

MODES = {
    "baseline": dict(
        assist=False,
        spare=False,
        worker_args=("--sticky-timeout", "10"),
        heartbeat=5.0,
        retry=1.0,
        task_timeout=timedelta(seconds=10),
    ),
    "tuned": dict(assist=False, spare=False, worker_args=(), heartbeat=None, retry=None, task_timeout=None),
    "assisted": dict(assist=True, spare=False, worker_args=(), heartbeat=None, retry=None, task_timeout=None),
    "spare": dict(assist=True, spare=True, worker_args=(), heartbeat=None, retry=None, task_timeout=None),
    "stop": dict(assist=True, spare=True, worker_args=(), heartbeat=None, retry=None, task_timeout=None),
}
DEFAULT_MODES = ("baseline", "tuned", "assisted", "spare")


async def run_mode(name: str, address: str, steps: int, kills: int, pace: float) -> dict:
    cfg = MODES[name]
    home = bench_home(f"resume-{name}", address)
    _, client = await connect(home)
    sup = Supervisor(home, address, assist=cfg["assist"], spare=cfg["spare"], worker_args=cfg["worker_args"])
    assert sup.acquire(), f"another supervisor owns {home.home}"
    sup.ensure_worker()
    await wait_ready(home, sup)
    kill_steps = [round(2 + i * (steps - 3) / max(1, kills - 1)) for i in range(kills)]
    started = time.monotonic()
    async with sup.running(stop_workers=True):
        plan = [] if name == "stop" else [FaultSpec("kill_at", s) for s in sorted(set(kill_steps))]
        run_id = await start_run(
            home,
            client,
            steps,
            pace,
            plan,
            heartbeat_timeout_s=cfg["heartbeat"],
            retry_initial_s=cfg["retry"],
            task_timeout=cfg["task_timeout"],
        )
        stops = await stop_at(home, sup, run_id, sorted(set(kill_steps))) if name == "stop" else []
        status = await wait_for_run(home, client, run_id, timeout=1800)
    extra = stop_figures(home, run_id, stops) if name == "stop" else {}
    return {
        "mode": name,
        "status": status,
        "wall_s": time.monotonic() - started,
        **figures(home, run_id, pace),
        **extra,
    }


async def stop_at(home: Settings, sup: Supervisor, run_id: str, steps: list[int]) -> list[tuple[int, float]]:
    """SIGSTOP the worker running each of these steps' model call; (pid, when) of each stop."""
    conn = db(home.db_path)
    stops = []
    for step in steps:
        await wait_until(lambda s=step: activity_logged(conn, run_id, s, "llm"), 120, every=0.01, what=f"step {step}")
        worker = sup.kill_target()
        if worker is not None and send_signal_if_ours(worker.ident, signal.SIGSTOP):
            stops.append((worker.pid, time.time()))
    return stops


def stop_figures(home: Settings, run_id: str, stops: list[tuple[int, float]]) -> dict:
    """stop -> the watchdog's SIGKILL, and stop -> the run's next activity (on the replacement)."""
    conn = db(home.db_path)
    to_kill, to_next = [], []
    for pid, at in stops:
        kill = conn.execute("SELECT at FROM worker_events WHERE event = 'kill' AND pid = ?", (pid,)).fetchone()
        if kill is not None:
            to_kill.append(kill["at"] - at)
            nxt = first_activity_after(conn, run_id, kill["at"])
            if nxt is not None:
                to_next.append(nxt - at)
    return {"stops": len(stops), "stop_to_kill_s": summary(to_kill), "stop_to_next_activity_s": summary(to_next)}


async def wait_ready(home: Settings, sup: Supervisor) -> None:
    while any(w is not None and not w.ready(home) for w in (sup.primary, sup.spare)):
        await asyncio.sleep(0.05)


def figures(home: Settings, run_id: str, pace: float) -> dict:
    conn = db(home.db_path)
    kills = conn.execute("SELECT * FROM worker_events WHERE run_id = ? AND event = 'kill'", (run_id,)).fetchall()
    killed = {k["step"] for k in kills if k["step"] is not None}  # a kill that landed between steps has none
    works = [
        r[0]
        for r in conn.execute(
            "SELECT ended_at - started_at FROM steps WHERE run_id = ? AND ended_at IS NOT NULL", (run_id,)
        )
        if r[0] is not None
    ]  # the step's own work, measured on this run (kills inflate only a few of the steps)
    work = statistics.median(works) if works else 0.0
    restart, stall = [], []
    for k in kills:
        lat = measure(conn, run_id, k["at"], k["pid"], k["step"])
        if lat.restart_s is not None:
            restart.append(lat.restart_s)
        if lat.next_step_s is not None:
            stall.append(max(0.0, lat.next_step_s - work - timer_ms(k["step"] or 0, pace) / 1000))
    return {
        "kills": len(kills),
        "killed_steps": sorted(killed),
        "step_work_s": work,
        "restart_s": summary(restart),
        "next_step_stall_s": summary(stall),
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--kills", type=int, default=10)
    p.add_argument("--pace", type=float, default=0.3)
    p.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"any of {','.join(MODES)}")
    p.add_argument("--temporal-address")
    args = p.parse_args()
    server_home = bench_home("resume-server", args.temporal_address)
    try:
        address, _ = await connect(server_home)
        results = [await run_mode(m, address, args.steps, args.kills, args.pace) for m in args.modes.split(",")]
        report(results)
        path = write_result("resume_latency", {"args": vars(args), "results": results})
        print(f"wrote {path}")
    finally:  # also when a mode or its figures failed: the next invocation must not adopt a stale server
        if args.temporal_address is None:
            from checkpoint_tui.ops.devserver import stop_devserver

            stop_devserver(server_home)


def report(results: list[dict]) -> None:
    base = next((r for r in results if r["mode"] == "baseline"), None)
    print(
        f"{'mode':<10} {'kills':>5}  {'restart min/median/max (s)':<28} {'ratio':>6}  "
        f"{'next-step stall min/median/max (s)':<36} {'ratio':>6}  status"
    )
    for r in results:
        rs, ns = r["restart_s"], r["next_step_stall_s"]
        r["restart_ratio_to_baseline"] = ratio(rs["median"], base and base["restart_s"]["median"])
        r["stall_ratio_to_baseline"] = ratio(ns["median"], base and base["next_step_stall_s"]["median"])
        print(
            f"{r['mode']:<10} {r['kills']:>5}  {triple(rs):<28} {fmt(r['restart_ratio_to_baseline']):>6}  "
            f"{triple(ns):<36} {fmt(r['stall_ratio_to_baseline']):>6}  {r['status']}"
        )
    for r in results:
        if r["mode"] == "stop":
            print(
                f"stop: {r['stops']} SIGSTOPs; stop -> watchdog kill {triple(r['stop_to_kill_s'])} s; "
                f"stop -> next activity {triple(r['stop_to_next_activity_s'])} s (target median <= 4 s)"
            )
    print("for context: the TypeScript predecessor measured ~12 s kill -> next step")


def ratio(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else value / base


def triple(s: dict) -> str:
    return "—" if s["median"] is None else f"{s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f}"


def fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    __import__("os")._exit(0)
