"""What a shorter workflow task timeout would cost: the cold replay it must leave room for.

    .venv/bin/python bench/task_timeout.py [--runs 3] [--steps 25] [--kills 4] [--timeouts 1,2,3]

A worker killed while it holds a workflow task stalls the run for the workflow task timeout. The
lower bound on that timeout is the first task of a replacement worker: it has no cached workflow,
so it replays the whole continue-as-new segment (up to 25 steps, ~700 events) before it answers. If
that replay takes longer than the timeout, the task times out although nothing died (a spurious
timeout) and the run retries it, possibly forever.

For each timeout: --runs runs of --steps steps (pace 0), each with `kill_at` faults spread over its
last steps (the supervisor SIGKILLs the worker mid-model-call; the spare, promoted, must replay
everything before it). From each run's Temporal history: every workflow task's started -> completed
time, the replay tasks (the first task each new worker identity completed), and every
WORKFLOW_TASK_TIMED_OUT event with the identity that held the task (a killed worker's timeout is
expected; any other is spurious; a sticky-queue schedule-to-start timeout is counted apart). Real dev
server, real workers, real kills."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

from temporalio.api.enums.v1 import EventType, TimeoutType

sys.path.insert(0, str(Path(__file__).parent))
from _common import bench_home, connect, summary, write_result  # noqa: E402
from checkpoint_tui.core.runs import start_run, wait_for_run  # noqa: E402
from checkpoint_tui.ledger.faults import FaultSpec  # noqa: E402
from checkpoint_tui.ops.supervisor import Supervisor  # noqa: E402

STARTED = EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
TIMED_OUT = EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT


def seconds(ts) -> float:
    return ts.seconds + ts.nanos / 1e9


async def task_figures(client, run_id: str) -> dict:
    """Workflow task durations, replay durations and timeouts from one run's history. A timeout is
    spurious when the worker that held the task completed another one later (it was alive)."""
    history = await client.get_workflow_handle(run_id).fetch_history()
    started: dict[int, tuple[float, str]] = {}
    durations, replays, timeouts = [], [], []
    seen_identities: set[str] = set()
    last_completed: dict[str, int] = {}
    sticky = 0
    for ev in history.events:
        if ev.event_type == STARTED:
            started[ev.event_id] = (seconds(ev.event_time), ev.workflow_task_started_event_attributes.identity)
        elif ev.event_type == COMPLETED:
            attrs = ev.workflow_task_completed_event_attributes
            t0, _ = started.get(attrs.started_event_id, (None, ""))
            if t0 is None:
                continue
            took = seconds(ev.event_time) - t0
            durations.append(took)
            if seen_identities and attrs.identity not in seen_identities:
                replays.append(took)  # a new worker's first task: the whole segment replayed
            seen_identities.add(attrs.identity)
            last_completed[attrs.identity] = ev.event_id
        elif ev.event_type == TIMED_OUT:
            attrs = ev.workflow_task_timed_out_event_attributes
            if attrs.timeout_type != TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE:
                sticky += 1  # never started: offered to a dead worker's sticky queue (1 s), then to anyone
                continue
            _, holder = started.get(attrs.started_event_id, (None, ""))
            timeouts.append((ev.event_id, holder))
    spurious = sum(1 for at, holder in timeouts if last_completed.get(holder, 0) > at)
    expected = len(timeouts) - spurious
    return {"durations": durations, "replays": replays, "spurious": spurious, "expected": expected, "sticky": sticky}


async def one_timeout(address: str, timeout_s: float, runs: int, steps: int, kills: int) -> dict:
    home = bench_home(f"task-timeout-{timeout_s:g}", address)
    _, client = await connect(home)
    sup = Supervisor(home, address)
    assert sup.acquire(), f"another supervisor owns {home.home}"
    sup.ensure_worker()
    durations, replays, spurious, expected, sticky, statuses = [], [], 0, 0, 0, []
    started = time.monotonic()
    async with sup.running(stop_workers=True):
        for _ in range(runs):
            kill_steps = [steps - 1 - 2 * i for i in range(kills)]  # late in the segment: most to replay
            run_id = await start_run(
                home,
                client,
                steps,
                0.0,
                [FaultSpec("kill_at", s) for s in kill_steps],
                task_timeout=timedelta(seconds=timeout_s),
            )
            statuses.append(await wait_for_run(home, client, run_id, timeout=600))
            figs = await task_figures(client, run_id)
            durations += figs["durations"]
            replays += figs["replays"]
            spurious += figs["spurious"]
            expected += figs["expected"]
            sticky += figs["sticky"]
    return {
        "timeout_s": timeout_s,
        "runs": runs,
        "statuses": statuses,
        "wall_s": time.monotonic() - started,
        "task_s": summary(durations),
        "replay_s": summary(replays),
        "replays": sorted(replays),
        "timeouts_spurious": spurious,
        "timeouts_after_kill": expected,
        "sticky_timeouts": sticky,
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--kills", type=int, default=4)
    p.add_argument("--timeouts", default="1,2,3")
    p.add_argument("--temporal-address")
    args = p.parse_args()
    server_home = bench_home("task-timeout-server", args.temporal_address)
    address, _ = await connect(server_home)
    results = []
    for t in (float(x) for x in args.timeouts.split(",")):
        results.append(await one_timeout(address, t, args.runs, args.steps, args.kills))
    print(
        f"{'timeout':>7}  {'replay min/median/max (s)':<26} {'p90':>5}  {'task median':>11}  "
        f"{'start-to-close timeouts: spurious / of a killed worker':<56} {'sticky':>6}  statuses"
    )
    for r in results:
        rs = r["replay_s"]
        p90 = statistics.quantiles(r["replays"], n=10)[-1] if len(r["replays"]) >= 2 else None
        triple = "/".join("-" if v is None else f"{v:.2f}" for v in (rs["min"], rs["median"], rs["max"]))
        print(
            f"{r['timeout_s']:>6g}s  {triple:<26} {'-' if p90 is None else f'{p90:.2f}':>5}  "
            f"{r['task_s']['median'] or 0:>10.3f}s  {r['timeouts_spurious']:>30} / {r['timeouts_after_kill']:<23} "
            f"{r['sticky_timeouts']:>6}  "
            f"{','.join(sorted(set(r['statuses'])))}"
        )
    path = write_result("task_timeout", {"args": vars(args), "results": results})
    print(f"wrote {path}")
    if args.temporal_address is None:
        from checkpoint_tui.ops.devserver import stop_devserver

        stop_devserver(server_home)


if __name__ == "__main__":
    asyncio.run(main())
