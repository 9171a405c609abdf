"""Our harness's per-step cost: AgentLoop at pace 0 (offline provider, ledger, effects, heartbeats,
bookkeeping) against a bare loop with the same activities as no-ops, on the same dev server in the
same invocation; plus AgentLoop with the two bookkeeping activities as local activities.

    .venv/bin/python bench/step_overhead.py [--steps 200] [--repeats 3] [--temporal-address H:P]
                                            [--ledger postgresql://...]

Prints steps/s of each (median of --repeats runs) and the ratios. Target: AgentLoop <= 1.3x the bare
loop's time per step."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import bench_home, connect, write_result  # noqa: E402
from bare_loop import BareInput  # noqa: E402
from checkpoint_tui.core.runs import new_run_id, start_run, wait_for_run  # noqa: E402
from checkpoint_tui.loop_worker.shared import AgentInput, ModelRef  # noqa: E402
from checkpoint_tui.model.offline import offline_decision  # noqa: E402
from checkpoint_tui.ops.supervisor import Supervisor  # noqa: E402


async def agent_rate(home, address, client, steps: int, local: bool) -> float:
    t = time.monotonic()
    if local:
        from checkpoint_tui.ledger.store import connect as db
        from checkpoint_tui.ledger.store import create_run

        run_id = new_run_id()
        create_run(db(home.ledger), run_id, steps, 0.0, "offline", home.task_queue)
        inp = AgentInput(run_id, steps, 0.0, ModelRef(), local_bookkeeping=True)
        await client.start_workflow("AgentLoop", inp, id=run_id, task_queue=home.task_queue)
    else:
        run_id = await start_run(home, client, steps, pace=0)
    status = await wait_for_run(home, client, run_id, timeout=1800)
    assert status == "COMPLETED", status
    return steps / (time.monotonic() - t)


async def bare_rate(client, task_queue: str, steps: int) -> float:
    run = new_run_id()
    with_tool = [offline_decision(run, s, steps, None)[0].action == "compute" for s in range(1, steps + 1)]
    t = time.monotonic()
    await client.execute_workflow("BareLoop", BareInput(steps, with_tool), id=f"bare-{run}", task_queue=task_queue)
    return steps / (time.monotonic() - t)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--temporal-address")
    p.add_argument("--ledger", help="a PostgreSQL ledger URL (default: the home's SQLite file)")
    args = p.parse_args()
    home = bench_home("overhead", args.temporal_address, args.ledger)
    address, client = await connect(home)
    sup = Supervisor(home, address, spare=False)
    sup.acquire()
    sup.ensure_worker()
    bare_queue = f"bare-{home.home_id}"
    script = str(Path(__file__).with_name("bare_loop.py"))
    bare = subprocess.Popen(
        [sys.executable, script, "--address", address, "--task-queue", bare_queue],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert bare.stdout is not None and bare.stdout.readline().strip() == "ready"
        while not sup.primary.ready(home):
            await asyncio.sleep(0.05)
        rates: dict[str, list[float]] = {"bare": [], "agent": [], "agent_local_bookkeeping": []}
        for _ in range(args.repeats):  # interleaved, so machine noise hits all three alike
            rates["bare"].append(await bare_rate(client, bare_queue, args.steps))
            rates["agent"].append(await agent_rate(home, address, client, args.steps, local=False))
            rates["agent_local_bookkeeping"].append(await agent_rate(home, address, client, args.steps, local=True))
    finally:
        bare.terminate()
        bare.wait(10)
        await sup.stop(stop_workers=True)
        if args.temporal_address is None:
            from checkpoint_tui.ops.devserver import stop_devserver

            stop_devserver(home)
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"{'loop':<26} {'steps/s (median)':>16} {'ms/step':>9} {'x bare':>7}   runs")
    for k, v in med.items():
        print(
            f"{k:<26} {v:>16.2f} {1000 / v:>9.1f} {med['bare'] / v:>7.2f}   {', '.join(f'{x:.2f}' for x in rates[k])}"
        )
    print(f"ledger: {home.ledger_label}")
    result = {
        "args": {**vars(args), "ledger": home.ledger_label},
        "rates": rates,
        "median_steps_per_s": med,
        "ratio_to_bare": {k: med["bare"] / v for k, v in med.items()},
    }
    path = write_result("step_overhead", result)
    print(f"wrote {path}")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    __import__("os")._exit(0)
