"""What --verify runs for a workload (its `VerifyPlan`: scenarios, and how their figures sum up), and the
one context every scenario runs in: a supervisor of the verify home started and stopped for it, the
runs it started, the report its checks go to. Scenarios every workload shares live here too; each
workload's own are in loop_scenarios.py (ours) and workflow_scenarios.py (a user's workflow)."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from temporalio.client import Client

from checkpoint_tui.core.workload import Workload
from checkpoint_tui.frameworks import Classifier
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.proof.report import Report
from checkpoint_tui.settings import Settings

CHILD_LINE_S = 60.0  # a `start --wait` child prints its run id within this


@dataclass
class VerifyContext:
    settings: Settings  # the verify home's
    address: str
    client: Client
    report: Report
    workload: Workload
    sup: Supervisor | None = None
    runs: list[str] = field(default_factory=list)  # every run this invocation started, in order
    completions: list[tuple[str, int, int]] = field(default_factory=list)  # (scenario, units done, of units)
    ready_s: float | None = None  # the slowest start of a worker until it could take a run
    framework: Classifier = None  # what classifies its activities (VerifyPlan's)
    readings: list = field(default_factory=list)  # each destination's ids after the last run's audit (--effects)

    async def supervise(self, assist: bool = True, spare: bool = True) -> Supervisor:
        """A fresh supervisor of the verify home, its workers started (or adopted) and ready: scenarios
        measure failover from there. A start-up that fails half-way stops what it started."""
        await self.unsupervise(stop_workers=False)
        sup = Supervisor(self.settings, self.address, assist=assist, spare=spare)
        if not sup.acquire():
            raise RuntimeError("another supervisor owns the verify home")
        self.sup = sup
        try:
            await asyncio.to_thread(sup.ensure_worker)
            for worker in (sup.primary, sup.spare):
                if worker is not None:
                    took = await self.workload.ready(self.settings, self.client, worker, connected=True)
                    self.ready_s = max(self.ready_s or 0.0, took or 0.0)
        except BaseException:
            await self.unsupervise(stop_workers=True)
            for w in worker_proc.load_all(self.settings):  # one recorded before it reached the pool
                await asyncio.to_thread(worker_proc.stop, self.settings, w)
                worker_proc.forget(self.settings, w.role, w.slot)
            raise
        sup.start()  # unsupervise() stops it
        return sup

    async def unsupervise(self, stop_workers: bool) -> None:
        if self.sup is not None:
            await self.sup.stop(stop_workers=stop_workers)
        self.sup = None

    async def start(self, workload: Workload | None = None) -> str:
        """A run of the workload (or of a shaped copy of it); the supervisor arms its planned kills."""
        run_id = await (workload or self.workload).start(self.settings, self.client)
        self.runs.append(run_id)
        if self.sup is not None:
            self.sup.poke()
        return run_id

    async def finish(self, run_id: str, timeout: float) -> str | None:
        return await self.workload.wait(self.settings, self.client, run_id, timeout=timeout)

    async def close(self) -> None:
        await self.unsupervise(stop_workers=True)


Scenario = Callable[[VerifyContext], Awaitable[None]]


@dataclass(frozen=True)
class VerifyPlan:
    scenarios: Sequence[Scenario]
    command: str  # as a report and JUnit name it, e.g. "checkpoint-tui --verify"
    header: str  # what the scenarios run, for the first printed line
    summarise: Callable[[Report, float], None] = lambda report, wall_s: None  # figures and targets of its own
    framework: Classifier = None  # a user's workflow: what classifies its activities (a framework, a declaration)


async def supervisor_killed(
    ctx: VerifyContext,
    number: int,
    workload: Workload,
    progressed: Callable[[str], Awaitable[object]],
    judge: Callable[[str, str | None], Awaitable[None]],
    timeout: float,
) -> None:
    """A separate `start --wait` process supervises a run; once the run `progressed`, that supervisor is
    SIGKILLed: its worker survives and a fresh supervisor adopts the same pid; `judge` checks the run."""
    await ctx.unsupervise(stop_workers=True)
    proc = await _start_wait(ctx, workload)
    try:
        assert proc.stdout is not None
        run_id = (await asyncio.wait_for(proc.stdout.readline(), CHILD_LINE_S)).decode().strip()
        ctx.runs.append(run_id)
        await progressed(run_id)
        worker = worker_proc.load(ctx.settings, "active")
        proc.send_signal(signal.SIGKILL)  # our own child: no pid reuse before we reap it
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    alive = worker is not None and worker.ident.exists()
    ctx.report.check(
        f"{number}. supervisor process SIGKILLed, its worker survived",
        proc.returncode == -signal.SIGKILL and alive,
        f"supervisor pid {proc.pid} rc={proc.returncode}; worker pid {worker.pid if worker else None} alive={alive}",
    )
    sup = await ctx.supervise()
    adopted = sup.primary.pid if sup.primary else None
    ctx.report.check(
        f"{number}b. a new supervisor adopted the same worker",
        worker is not None and adopted == worker.pid,
        f"new supervisor adopted worker {adopted} (was {worker.pid if worker else None})",
    )
    await judge(run_id, await ctx.finish(run_id, timeout))


async def _start_wait(ctx: VerifyContext, workload: Workload) -> asyncio.subprocess.Process:
    """`start --wait` of this run's workload, as a separate process whose stdout gives the run id."""
    s = ctx.settings
    global_flags, start_flags = workload.command_flags(s)
    where = ["--home", str(s.home), "--temporal-address", ctx.address, "--namespace", s.namespace]
    argv = [sys.executable, "-m", "checkpoint_tui", *where, "--task-queue", s.task_queue]
    argv += [*s.connection.worker_args(), *global_flags, "start", *start_flags, "--wait"]
    log = open_log(s.run_dir, "verify-supervisor.log")  # capped and rotated (ops/logcap.py)
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=log.fd,
            stdin=asyncio.subprocess.DEVNULL,
            env=s.child_env(),
            cwd=s.worker_cwd,
        )
    finally:
        log.close()  # the child holds its own copy
