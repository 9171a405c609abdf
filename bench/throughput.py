"""Many runs at once: N concurrent AgentLoop runs of S steps at pace 0 on one worker pool, against the
same number of runs of a bare loop (the same activities per step as no-ops, bench/bare_loop.py, on
workers with the same settings), in one invocation on the same dev server, interleaved per repeat.

    .venv/bin/python bench/throughput.py [--runs 16] [--steps 10] [--repeats 3] [--workers 1]
                                         [--ledger postgresql://...] [--temporal-address H:P]
                                         [--curve] [--json PATH]

Prints steps/s of both (median of --repeats), the time ratio (ours' wall time / bare's; target
<= 1.3 at 16 runs), schedule-to-start p50/p99 of every activity (from the runs' histories) and the
harness's share of a step (1 - bare's time / ours': the ledger, the effects, heartbeats and
bookkeeping together). --curve: the same at 1, 4, 16, 64 runs and 1, 2, 4 workers."""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from temporalio.api.enums.v1 import EventType  # noqa: E402

from _common import bench_home, connect, machine, write_result  # noqa: E402
from bare_loop import BareInput  # noqa: E402
from checkpoint_tui.app.runs import new_run_id, start_run, wait_for_run  # noqa: E402
from checkpoint_tui.model.offline import offline_decision  # noqa: E402
from checkpoint_tui.ops.supervisor import Supervisor  # noqa: E402
from checkpoint_tui.proof.task_cost import spans  # noqa: E402

SCHEDULED, STARTED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
CURVE_RUNS, CURVE_WORKERS = (1, 4, 16, 64), (1, 2, 4)


async def schedule_to_start(client, workflow_ids: list[str]) -> list[float]:
    """Every activity's wait from ACTIVITY_TASK_SCHEDULED to ACTIVITY_TASK_STARTED, in seconds."""
    by = lambda ev: ev.activity_task_started_event_attributes.scheduled_event_id  # noqa: E731
    return [done - start for wid in workflow_ids for start, done in await spans(client, wid, SCHEDULED, STARTED, by)]


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def ours(home, client, runs: int, steps: int) -> tuple[float, list[str]]:
    t = time.monotonic()
    ids = [await start_run(home, client, steps, pace=0) for _ in range(runs)]
    statuses = await asyncio.gather(*(wait_for_run(home, client, r, timeout=1800) for r in ids))
    wall = time.monotonic() - t
    assert all(s == "COMPLETED" for s in statuses), statuses
    return wall, ids


async def bare(client, task_queue: str, runs: int, steps: int) -> tuple[float, list[str]]:
    inputs = []
    for _ in range(runs):
        run = new_run_id()
        with_tool = [offline_decision(run, s, steps, None)[0].action == "compute" for s in range(1, steps + 1)]
        inputs.append((f"bare-{run}", BareInput(steps, with_tool)))
    t = time.monotonic()
    await asyncio.gather(*(client.execute_workflow("BareLoop", inp, id=wid, task_queue=task_queue)
                           for wid, inp in inputs))  # fmt: skip
    return time.monotonic() - t, [wid for wid, _ in inputs]


class Pools:
    """Our pool (the supervisor's workers) and the bare loop's worker processes, W of each."""

    def __init__(self, home, address: str, workers: int) -> None:
        self.home, self.address, self.workers = replace(home, pool_size=workers), address, workers
        self.queue = f"bare-{home.home_id}"
        self.sup: Supervisor | None = None
        self.bare: list[subprocess.Popen] = []

    async def __aenter__(self) -> Pools:
        self.sup = Supervisor(self.home, self.address, spare=False)
        self.sup.acquire()
        self.sup.ensure_worker()
        script = str(Path(__file__).with_name("bare_loop.py"))
        for _ in range(self.workers):
            proc = subprocess.Popen([sys.executable, script, "--address", self.address, "--task-queue", self.queue],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
            self.bare.append(proc)
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while len(self.sup.pool) < self.workers or not all(w.ready(self.home) for w in self.sup.pool_workers()):
            assert time.monotonic() < deadline, "our workers did not connect"
            await asyncio.sleep(0.05)
        return self

    async def __aexit__(self, *exc) -> None:
        for proc in self.bare:
            proc.terminate()
        for proc in self.bare:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self.sup is not None:
            await self.sup.stop(stop_workers=True)


async def point(home, address, client, runs: int, steps: int, workers: int, repeats: int) -> dict:
    walls: dict[str, list[float]] = {"ours": [], "bare": []}
    waits: dict[str, list[float]] = {"ours": [], "bare": []}
    async with Pools(home, address, workers) as pools:
        for _ in range(repeats):  # interleaved, so machine noise hits both alike
            wall, ids = await bare(client, pools.queue, runs, steps)
            walls["bare"].append(wall)
            waits["bare"] += await schedule_to_start(client, ids)
            wall, ids = await ours(pools.home, client, runs, steps)
            walls["ours"].append(wall)
            waits["ours"] += await schedule_to_start(client, ids)
    med = {k: statistics.median(v) for k, v in walls.items()}
    total = runs * steps
    return {
        "runs": runs, "steps": steps, "workers": workers, "walls_s": walls,
        "ours_steps_per_s": total / med["ours"], "bare_steps_per_s": total / med["bare"],
        "ratio": med["ours"] / med["bare"], "harness_share": 1 - med["bare"] / med["ours"],
        "schedule_to_start_s": {k: {"p50": pct(v, 0.5), "p99": pct(v, 0.99), "n": len(v)} for k, v in waits.items()},
    }  # fmt: skip


def show(p: dict) -> None:
    sts = p["schedule_to_start_s"]
    ms = lambda v: "—" if v is None else f"{v * 1000:.0f}"  # noqa: E731
    print(f"{p['runs']:>4} runs x {p['steps']} steps, {p['workers']} worker(s): ours {p['ours_steps_per_s']:7.1f} "
          f"steps/s · bare {p['bare_steps_per_s']:7.1f} · ratio {p['ratio']:.2f} (walls ours "
          f"{', '.join(f'{w:.2f}' for w in p['walls_s']['ours'])} s; bare "
          f"{', '.join(f'{w:.2f}' for w in p['walls_s']['bare'])} s) · schedule-to-start p50/p99 ours "
          f"{ms(sts['ours']['p50'])}/{ms(sts['ours']['p99'])} ms, bare {ms(sts['bare']['p50'])}/"
          f"{ms(sts['bare']['p99'])} ms · harness share of a step {p['harness_share'] * 100:.0f} %", flush=True)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--temporal-address")
    p.add_argument("--ledger", help="a PostgreSQL ledger URL (default: the home's SQLite file)")
    p.add_argument("--curve", action="store_true", help=f"runs {CURVE_RUNS} x workers {CURVE_WORKERS}")
    p.add_argument("--json", dest="json_path", type=Path, help="also write the result here")
    args = p.parse_args()
    if min(args.runs, args.steps, args.repeats, args.workers) < 1:
        p.error("--runs, --steps, --repeats and --workers are whole numbers >= 1")
    home = bench_home("throughput", args.temporal_address, args.ledger)
    address, client = await connect(home)
    grid = [(r, w) for w in CURVE_WORKERS for r in CURVE_RUNS] if args.curve else [(args.runs, args.workers)]
    points = []
    try:
        for runs, workers in grid:
            points.append(await point(home, address, client, runs, args.steps, workers, args.repeats))
            show(points[-1])
    finally:
        if args.temporal_address is None:
            from checkpoint_tui.ops.devserver import stop_devserver

            stop_devserver(home)
    print(f"ledger: {home.ledger_label}")
    result = {"args": {**vars(args), "json_path": str(args.json_path or ""), "ledger": home.ledger_label},
              **points[0], "points": points}  # fmt: skip
    path = write_result("throughput", result)
    print(f"wrote {path}")
    if args.json_path is not None:
        args.json_path.write_text(json.dumps({**result, "machine": machine()}, indent=2))
        print(f"wrote {args.json_path}")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    __import__("os")._exit(0)
