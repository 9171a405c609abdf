"""TUI refresh cost on a large run: one tick = building the View (SQLite + Temporal) + applying it.

    .venv/bin/python bench/tui_tick.py [--steps 1000] [--seconds 30] [--temporal-address HOST:PORT]

Makes (once, then reuses) a real run of --steps steps at pace 0 in run/bench/tui-home, then opens the
real app headless on it and measures each tick and the process's CPU share. Targets: tick median
<= 15 ms, CPU <= 5 % of one core."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time

import psutil

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from _common import bench_home, connect, summary, write_result  # noqa: E402
from checkpoint_tui.app.runs import start_run, wait_for_run  # noqa: E402
from checkpoint_tui.app.session import LabSession  # noqa: E402
from checkpoint_tui.ledger.store import connect as db  # noqa: E402
from checkpoint_tui.ops.supervisor import Supervisor  # noqa: E402
from checkpoint_tui.tui.app import CheckpointApp  # noqa: E402


async def ensure_big_run(home, steps: int) -> str:
    conn = db(home.db_path)
    row = conn.execute(
        "SELECT run_id FROM runs WHERE total_steps = ? AND status = 'completed' ORDER BY created_at DESC LIMIT 1",
        (steps,),
    ).fetchone()
    if row:
        return row["run_id"]
    address, client = await connect(home)
    sup = Supervisor(home, address, spare=False)
    sup.acquire()
    sup.ensure_worker()
    t0 = time.monotonic()
    async with sup.running(stop_workers=True):
        run_id = await start_run(home, client, steps, pace=0)
        print(f"making a {steps}-step run {run_id} (pace 0)…", flush=True)
        status = await wait_for_run(home, client, run_id, timeout=3600)
    print(f"  {status} in {time.monotonic() - t0:.0f} s", flush=True)
    return run_id


async def measure(home, run_id: str, seconds: float, interval: float) -> dict:
    session = LabSession(home)
    ticks: list[tuple[float, float]] = []
    app = CheckpointApp(session, interval, tick_observer=lambda poll, apply: ticks.append((poll, apply)))
    proc = psutil.Process()
    async with app.run_test(size=(200, 50)) as pilot:
        while not ticks or not app.query_one("#history").names:
            await pilot.pause(0.05)
        session.view_run(run_id)
        follower = lambda: session._history  # noqa: E731
        while len(ticks) < 3 or follower() is None or not follower().caught_up:
            await pilot.pause(0.05)  # the first (full) load and the whole history backlog
        await pilot.pause(2 * interval)
        first = list(ticks)
        ticks.clear()
        cpu0, wall0 = sum(proc.cpu_times()[:2]), time.monotonic()
        await pilot.pause(seconds)
        cpu = sum(proc.cpu_times()[:2]) - cpu0
        wall = time.monotonic() - wall0
        rows = {p: app.query_one(p).row_count for p in ("#timeline", "#ledger")}
        rows["#history"] = app.query_one("#history").row_count
        steady = list(ticks)
        # Live: a run in progress (pace 0.2) is displayed while its worker (another process) works.
        live_run = await session.new_run(300, 0.2)
        while len(ticks) < len(steady) + 3:
            await pilot.pause(0.05)
        ticks.clear()
        cpu1, wall1 = sum(proc.cpu_times()[:2]), time.monotonic()
        await pilot.pause(seconds)
        live_cpu = (sum(proc.cpu_times()[:2]) - cpu1) / (time.monotonic() - wall1)
        live = [(p + a) * 1000 for p, a in ticks]
        live_poll = [p * 1000 for p, _ in ticks]
        live_apply = [a * 1000 for _, a in ticks]
        await session.cancel()
        with contextlib.suppress(Exception):
            await session.shutdown(stop_everything=True)  # the bench leaves nothing running
    total = [(p + a) * 1000 for p, a in steady]
    return {
        "run_id": run_id,
        "rows": rows,
        "first_load_ms": [round((p + a) * 1000, 1) for p, a in first[:3]],
        "tick_ms": summary(total),
        "poll_ms": summary([p * 1000 for p, _ in steady]),
        "apply_ms": summary([a * 1000 for _, a in steady]),
        "cpu_share_of_one_core": cpu / wall,
        "live_run_id": live_run,
        "live_tick_ms": summary(live),
        "live_poll_ms": summary(live_poll),
        "live_apply_ms": summary(live_apply),
        "live_cpu_share_of_one_core": live_cpu,
        "poll_interval_s": interval,
        "seconds": wall,
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--interval", type=float, default=0.5)
    p.add_argument("--temporal-address")
    args = p.parse_args()
    home = bench_home("tui-home", args.temporal_address)
    run_id = await ensure_big_run(home, args.steps)
    result = await measure(home, run_id, args.seconds, args.interval)
    path = write_result("tui_tick", {"steps": args.steps, **result})
    t, c = result["tick_ms"], result["cpu_share_of_one_core"]
    print(f"rows shown: {result['rows']}   first loads (ms): {result['first_load_ms']}")
    print(f"{'tick (poll+apply)':<22} median {t['median']:.2f} ms  max {t['max']:.2f} ms  n={t['n']}   target ≤ 15 ms")
    print(f"{'  poll / apply':<22} median {result['poll_ms']['median']:.2f} / {result['apply_ms']['median']:.2f} ms")
    print(f"{'app CPU':<22} {c * 100:.2f} % of one core over {result['seconds']:.0f} s   target ≤ 5 %")
    lt, lc = result["live_tick_ms"], result["live_cpu_share_of_one_core"]
    print(f"{'live run: tick':<22} median {lt['median']:.2f} ms  max {lt['max']:.2f} ms  n={lt['n']}")
    lp, la = result["live_poll_ms"]["median"], result["live_apply_ms"]["median"]
    print(f"{'  poll / apply':<22} median {lp:.2f} / {la:.2f} ms")
    print(f"{'live run: app CPU':<22} {lc * 100:.2f} % of one core (worker is another process)")
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    __import__("os")._exit(0)
