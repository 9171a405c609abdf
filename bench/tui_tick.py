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
from checkpoint_tui.ledger.store import connect as db  # noqa: E402
from checkpoint_tui.ops.supervisor import Supervisor  # noqa: E402
from checkpoint_tui.runs import start_run, wait_for_run  # noqa: E402
from checkpoint_tui.session import LabSession  # noqa: E402
from checkpoint_tui.tui.app import CheckpointApp, ViewReady  # noqa: E402


async def ensure_big_run(home, steps: int) -> str:
    conn = db(home.db_path)
    row = conn.execute(
        "SELECT run_id FROM runs WHERE total_steps = ? AND status = 'completed' ORDER BY created_at DESC LIMIT 1",
        (steps,),
    ).fetchone()
    if row:
        return row["run_id"]
    address, client = await connect(home)
    sup = Supervisor(home, address, client, spare=False)
    sup.acquire()
    sup.ensure_worker()
    watch = asyncio.create_task(sup.run())
    t0 = time.monotonic()
    run_id = await start_run(home, client, steps, pace=0)
    print(f"making a {steps}-step run {run_id} (pace 0)…", flush=True)
    status = await wait_for_run(home, client, run_id, timeout=3600)
    print(f"  {status} in {time.monotonic() - t0:.0f} s", flush=True)
    await sup.stop(stop_workers=True)
    watch.cancel()
    return run_id


class TimedApp(CheckpointApp):
    def __init__(self, session, poll_interval: float) -> None:
        super().__init__(session, poll_interval=poll_interval)
        self.ticks: list[tuple[float, float]] = []  # (poll_s, apply_s)
        self._poll_s = 0.0

    def apply_view(self, message: ViewReady) -> None:
        t = time.perf_counter()
        super().apply_view(message)
        self.ticks.append((self._poll_s, time.perf_counter() - t))


async def measure(home, run_id: str, seconds: float, interval: float) -> dict:
    session = LabSession(home)
    app = TimedApp(session, interval)
    original_poll = session.poll

    async def timed_poll():
        t = time.perf_counter()
        view = await original_poll()
        app._poll_s = time.perf_counter() - t
        return view

    session.poll = timed_poll  # type: ignore[method-assign]
    proc = psutil.Process()
    async with app.run_test(size=(200, 50)) as pilot:
        while not app.ticks or app.query_one("#history").row_count == 0:
            await pilot.pause(0.05)
        session.view_run(run_id)
        while len(app.ticks) < 3 or app.query_one("#history").row_count < 100:
            await pilot.pause(0.05)
        await pilot.pause(2.0)  # the first (full) load and the history backlog
        first = list(app.ticks)
        app.ticks.clear()
        cpu0, wall0 = sum(proc.cpu_times()[:2]), time.monotonic()
        await pilot.pause(seconds)
        cpu = sum(proc.cpu_times()[:2]) - cpu0
        wall = time.monotonic() - wall0
        rows = {p: app.query_one(p).row_count for p in ("#timeline", "#ledger", "#history")}
        steady = list(app.ticks)
        with contextlib.suppress(Exception):
            await session.shutdown(stop_everything=False)
    total = [(p + a) * 1000 for p, a in steady]
    return {
        "run_id": run_id,
        "rows": rows,
        "first_load_ms": [round((p + a) * 1000, 1) for p, a in first[:3]],
        "tick_ms": summary(total),
        "poll_ms": summary([p * 1000 for p, _ in steady]),
        "apply_ms": summary([a * 1000 for _, a in steady]),
        "cpu_share_of_one_core": cpu / wall,
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
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    __import__("os")._exit(0)
