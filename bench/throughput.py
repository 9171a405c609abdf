"""Many runs at once: N concurrent AgentLoop runs of S steps at pace 0 on one worker pool, against the
same number of runs of a bare loop (the same activities per step as no-ops, bench/bare_loop.py, on
workers with the same settings), in one invocation on the same dev server, interleaved per repeat
(bare first on even repeats, ours first on odd, so a drifting machine hurts neither side more).

    .venv/bin/python bench/throughput.py [--runs 16] [--steps 10] [--repeats 3] [--workers 1]
                                         [--ledger postgresql://...] [--temporal-address H:P]
                                         [--curve] [--json PATH]

Prints steps/s of both (median of --repeats), the time ratio (ours' wall time / bare's; target
<= 1.3 at 16 runs), schedule-to-start p50/p99 of every activity (from the runs' histories), the
harness's share of a step (1 - bare's time / ours': the ledger, the effects, heartbeats and
bookkeeping together), the CPU a step cost each side, by process (the workers, the dev server when
the bench started it, PostgreSQL's processes with --ledger, the bench itself) and the ledger's share:
a step's ledger writes timed alone on the same ledger (bench/ledger_ops.py) against the CPU our
worker spent a step. Both sides
are timed from their starts to Temporal's last result. --curve: the same at 1, 4, 16, 64 runs and 1,
2, 4 workers. Each invocation starts from an empty home (dev server history and SQLite ledger), and
one untimed run of each side warms both up first."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))
from temporalio.api.enums.v1 import EventType  # noqa: E402

from _common import bench_home, connect, machine, write_result  # noqa: E402
from bare_loop import BareInput  # noqa: E402
from checkpoint_tui.core.runs import new_run_id, start_run  # noqa: E402
from checkpoint_tui.ledger import queries  # noqa: E402
from checkpoint_tui.ledger.store import connect as connect_ledger  # noqa: E402
from checkpoint_tui.model.offline import offline_decision  # noqa: E402
from checkpoint_tui.ops.devserver import recorded, stop_devserver  # noqa: E402
from checkpoint_tui.ops.supervisor import Supervisor  # noqa: E402
from checkpoint_tui.proof.measure.task_cost import spans  # noqa: E402
from ledger_ops import cost_per_step  # noqa: E402

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
    """Timed like bare(): started together, done when Temporal has every result (the app's own wait
    polls the ledger every 0.2 s, which would add up to that to each wall and load the ledger). The
    ledger's word is checked after the clock stops: every run row completed."""
    t = time.monotonic()
    ids = await asyncio.gather(*(start_run(home, client, steps, pace=0) for _ in range(runs)))
    await asyncio.gather(*(client.get_workflow_handle(r).result() for r in ids))
    wall = time.monotonic() - t
    conn = connect_ledger(home.ledger)
    statuses = [(queries.run(conn, r).status, queries.count_completed(conn, r)) for r in ids]
    assert all(s == ("completed", steps) for s in statuses), statuses
    return wall, ids


async def bare(client, task_queue: str, runs: int, steps: int) -> tuple[float, list[str]]:
    inputs = []
    for _ in range(runs):
        run = new_run_id()
        with_tool = [offline_decision(run, s, steps, None)[0].action == "compute" for s in range(1, steps + 1)]
        inputs.append((f"bare-{run}", BareInput(steps, with_tool)))
    t = time.monotonic()
    await asyncio.gather(
        *(client.execute_workflow("BareLoop", inp, id=wid, task_queue=task_queue) for wid, inp in inputs)
    )
    return time.monotonic() - t, [wid for wid, _ in inputs]


class CpuMeter:
    """CPU seconds (user + system) each group of processes spent inside one side's timed sections:
    on a machine the runs saturate, the ratio is where that work goes. Groups: the dev server (when
    the bench started it), that side's workers, every process named postgres on this machine (with
    --ledger; a shared server's other work counts too) and this process (starts, waits, checks)."""

    def __init__(self, pids: dict[str, Callable[[], list[int]]]) -> None:
        self.pids = pids
        self.spent: dict[str, float] = {name: 0.0 for name in pids}

    def _now(self) -> dict[int, float]:
        seen: dict[int, float] = {}
        for find in self.pids.values():
            for pid in find():
                with contextlib.suppress(psutil.Error):
                    t = psutil.Process(pid).cpu_times()
                    seen[pid] = t.user + t.system
        return seen

    @contextlib.asynccontextmanager
    async def measuring(self):
        before = self._now()
        yield
        after = self._now()
        for name, find in self.pids.items():  # a process that ended in between is not counted
            self.spent[name] += sum(after[p] - before[p] for p in find() if p in after and p in before)


def postgres_pids() -> list[int]:
    return [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]


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
            proc = subprocess.Popen(
                [sys.executable, script, "--address", self.address, "--task-queue", self.queue],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
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


def meters(home, pools: Pools) -> dict[str, CpuMeter]:
    server, _ = recorded(home)
    common: dict[str, Callable[[], list[int]]] = {"temporal": lambda: [server.pid] if server else []}
    if home.ledger_url:
        common["postgresql"] = postgres_pids
    common["bench"] = lambda: [os.getpid()]
    assert pools.sup is not None
    return {
        "ours": CpuMeter({"worker": lambda: [w.pid for w in pools.sup.pool_workers()], **common}),
        "bare": CpuMeter({"worker": lambda: [p.pid for p in pools.bare], **common}),
    }


async def point(home, address, client, runs: int, steps: int, workers: int, repeats: int) -> dict:
    walls: dict[str, list[float]] = {"ours": [], "bare": []}
    waits: dict[str, list[float]] = {"ours": [], "bare": []}
    async with Pools(home, address, workers) as pools:
        cpu = meters(home, pools)
        await bare(client, pools.queue, 1, 2)  # warm-up, untimed: each side's first workflow and connections
        await ours(pools.home, client, 1, 2)
        for i in range(repeats):  # interleaved, first one then the other, so drift hits both alike
            for side in ("bare", "ours") if i % 2 == 0 else ("ours", "bare"):
                async with cpu[side].measuring():
                    if side == "bare":
                        wall, ids = await bare(client, pools.queue, runs, steps)
                    else:
                        wall, ids = await ours(pools.home, client, runs, steps)
                walls[side].append(wall)
                waits[side] += await schedule_to_start(client, ids)
    med = {k: statistics.median(v) for k, v in walls.items()}
    total = runs * steps
    cpu_ms = {side: {k: v * 1000 / (total * repeats) for k, v in m.spent.items()} for side, m in cpu.items()}
    # The ledger's share: the same writes a step makes (bench/ledger_ops.py), alone in this process on
    # the same ledger, against the CPU our worker spent a step in the timed runs.
    # PostgreSQL's server runs those writes in processes of its own: measured beside, not in the share.
    server = CpuMeter({"postgresql": postgres_pids if home.ledger_url else list})
    async with server.measuring():
        ledger_wall, ledger_cpu = cost_per_step(str(home.ledger), home.run_dir / "ledger-ops", total, "throughput")
    pg_cpu = server.spent["postgresql"] * 1000 / total if home.ledger_url else None
    return {
        "runs": runs,
        "steps": steps,
        "workers": workers,
        "walls_s": walls,
        "ours_steps_per_s": total / med["ours"],
        "bare_steps_per_s": total / med["bare"],
        "ratio": med["ours"] / med["bare"],
        "harness_share": 1 - med["bare"] / med["ours"],
        "schedule_to_start_s": {k: {"p50": pct(v, 0.5), "p99": pct(v, 0.99), "n": len(v)} for k, v in waits.items()},
        "cpu_ms_per_step": cpu_ms,
        "ledger_ms_per_step": {"wall": ledger_wall, "cpu": ledger_cpu, "postgresql_cpu": pg_cpu},
        "ledger_share": ledger_cpu / cpu_ms["ours"]["worker"] if cpu_ms["ours"]["worker"] > 0 else None,
    }


def show(p: dict) -> None:
    sts = p["schedule_to_start_s"]
    ms = lambda v: "—" if v is None else f"{v * 1000:.0f}"  # noqa: E731
    print(
        f"{p['runs']:>4} runs x {p['steps']} steps, {p['workers']} worker(s): ours {p['ours_steps_per_s']:7.1f} "
        f"steps/s · bare {p['bare_steps_per_s']:7.1f} · ratio {p['ratio']:.2f} (walls ours "
        f"{', '.join(f'{w:.2f}' for w in p['walls_s']['ours'])} s; bare "
        f"{', '.join(f'{w:.2f}' for w in p['walls_s']['bare'])} s) · schedule-to-start p50/p99 ours "
        f"{ms(sts['ours']['p50'])}/{ms(sts['ours']['p99'])} ms, bare {ms(sts['bare']['p50'])}/"
        f"{ms(sts['bare']['p99'])} ms · harness share of a step {p['harness_share'] * 100:.0f} %",
        flush=True,
    )
    for side, spent in p["cpu_ms_per_step"].items():
        parts = " + ".join(f"{name} {v:.1f}" for name, v in spent.items())
        print(f"      CPU a step, {side}: {parts} = {sum(spent.values()):.1f} ms", flush=True)
    led, share = p["ledger_ms_per_step"], p["ledger_share"]
    pct_of = "—" if share is None else f"{share * 100:.0f} %"
    pg = led["postgresql_cpu"]
    server = "" if pg is None else f" (+ {pg:.2f} ms in PostgreSQL's server, not in it)"
    print(
        f"      the ledger's writes for a step, alone: {led['wall']:.2f} ms wall, {led['cpu']:.2f} ms CPU in the "
        f"writing process = {pct_of} of our worker's CPU a step{server}",
        flush=True,
    )


def fresh_home(address: str | None, ledger: str | None):
    """A home of the bench's own, emptied first: its dev server's history store and its ledger grow
    with every run (56 MB of history after a few invocations), so each invocation starts from empty
    ones and invocations compare."""
    home = bench_home("throughput", address, ledger)
    stop_devserver(home)  # a server an interrupted invocation left behind, if any
    shutil.rmtree(home.home)
    return bench_home("throughput", address, ledger)


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
    home = fresh_home(args.temporal_address, args.ledger)
    address, client = await connect(home)
    grid = [(r, w) for w in CURVE_WORKERS for r in CURVE_RUNS] if args.curve else [(args.runs, args.workers)]
    points = []
    try:
        for runs, workers in grid:
            points.append(await point(home, address, client, runs, args.steps, workers, args.repeats))
            show(points[-1])
    finally:
        if args.temporal_address is None:
            stop_devserver(home)
    print(f"ledger: {home.ledger_label}")
    result = {
        "args": {**vars(args), "json_path": str(args.json_path or ""), "ledger": home.ledger_label},
        **points[0],
        "points": points,
    }
    path = write_result("throughput", result)
    print(f"wrote {path}")
    if args.json_path is not None:
        args.json_path.write_text(json.dumps({**result, "machine": machine()}, indent=2))
        print(f"wrote {args.json_path}")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    __import__("os")._exit(0)
