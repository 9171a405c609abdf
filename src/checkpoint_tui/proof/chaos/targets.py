"""What chaos asks of a workload (proof/chaos/engine.py runs the schedule; the workload's adapter,
workloads/, gives its target): when an event's moment has come, what only this workload can fire, how
the run is audited, and how the audit reads as checks and lines. Ours is proof/chaos/loop_target.py; a
user's workflow (agent frameworks included) is proof/chaos/workflow_target.py."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

from temporalio.client import Client

from checkpoint_tui.core.audit import Audit
from checkpoint_tui.core.workload import Workload
from checkpoint_tui.errors import Failed
from checkpoint_tui.ledger import inspect_queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.inspect_queries import KillEvent
from checkpoint_tui.proof.chaos import fleet_events
from checkpoint_tui.proof.chaos.coverage import Aims
from checkpoint_tui.proof.chaos.schedule import TARGETS, ChaosEvent
from checkpoint_tui.proof.nemeses.aim import PROGRESS_TIMEOUT_S
from checkpoint_tui.proof.nemeses.hop import Hop, watching_hop
from checkpoint_tui.proof.nemeses.http_log import HttpLog
from checkpoint_tui.proof.nemeses.records import Fired, Hit, Miss, NotFired
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.chaos import ChaosReport, TargetFigures
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until


def kills_worker(kind: str) -> bool:
    """The event ends in a worker's SIGKILL (at a moment, at a crash point, by its own hook, by the watchdog
    after a hang): not a pause, nor a game day's graceful stop."""
    return TARGETS.get(kind) == "worker" and kind != "pause" and kind not in fleet_events.TARGETS


class ChaosRun(Protocol):
    """What a target reads of the chaos run it serves, and the records it completes after the run
    (proof/chaos/engine.py's `Chaos` is the one there is)."""

    settings: Settings
    steps: int  # the units the schedule is placed over
    schedule: list[ChaosEvent]
    run_ids: list[str]  # the lead's first
    runs: int  # concurrent runs under the one schedule
    hop: Hop | None  # the gRPC hop between the workers and Temporal, if the run has one
    kills: list[Fired]
    pauses: list[Fired]
    resets: list[Fired]
    not_fired: list[NotFired]

    @property
    def client(self) -> Client:
        """The run's Temporal client (connected as the run starts)."""
        ...


class Handled(enum.Enum):
    """A target's answer to an event that is not a Hit or a Miss of its own."""

    NOT_MINE = "what every workload has: the engine fires it"
    BY_THE_WORKER = "a hook crash of the worker's fault plan: it fires itself, nothing to record here"


class ChaosTarget:
    workload: Workload
    lead_audit: Audit | None = None  # the lead run's (it places the events), once audited
    allow_unexercised = False  # --allow-unexercised: a run no fault reached passes (a user's workflow)

    def header(self, chaos: ChaosRun) -> str:
        raise NotImplementedError

    def span(self, chaos: ChaosRun) -> int:
        """How many units the run is expected to have (bounds the wait for its end)."""
        raise NotImplementedError

    async def start(self, chaos: ChaosRun, client: Client) -> str:
        raise NotImplementedError

    async def arrive(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> str | None:
        """Wait for the event's moment (its delay included); None: fire it; else why it cannot fire."""
        raise NotImplementedError

    async def strike(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> Hit | Miss | Handled:
        """Fire what only this workload has (or how it fires what every workload has)."""
        return Handled.NOT_MINE

    async def closed(self, chaos: ChaosRun, run_id: str) -> bool:
        raise NotImplementedError

    async def activity_windows(self, chaos: ChaosRun, run_id: str) -> dict[str, str]:
        """{activity type: window} for the types the workload's own classification names (a framework's
        model request is a `model call`, its tool activity a `tool call`); the lab's loop needs none."""
        return {}

    def deaths(self, chaos: ChaosRun, conn: Ledger, run_id: str) -> list[KillEvent] | None:
        """The worker deaths to place against this run's history; None: those the ledger files under
        the run (a death our loop's worker had a step of the run in flight for). With several runs on
        the same workers, every death of the chaos's workers, whichever run it was filed under: each
        interrupted every run, and each run's own history says where."""
        if len(chaos.run_ids) == 1:
            return None
        return inspect_queries.kill_events(conn, run_id, of_runs=chaos.run_ids)

    def coverage_aims(self, chaos: ChaosRun) -> Aims:
        """What --until-covered aims at on this workload, after the seeded run (`chaos`)."""
        raise NotImplementedError

    def round_target(self) -> ChaosTarget:
        """A fresh target for one aimed round of --until-covered."""
        raise NotImplementedError

    def probe(self, chaos: ChaosRun) -> list | None:
        """A user's workload: the effects library's probe log records (where a death inside a user's
        effect was, core/windows.classify); None for our loop, whose effects say it themselves."""
        return None

    def in_flight(self, chaos: ChaosRun, run_id: str) -> int:
        raise NotImplementedError

    def striking(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> None:
        """Note where the run is as `ev` strikes, for landing() to say; nothing by default."""

    def landing(self, ev: ChaosEvent) -> dict:
        """Where the event about to be recorded landed (`step`: the unit; more for the report), as
        its arrival or its strike saw it; {} when its place is the schedule's."""
        return {}

    async def audit(self, chaos: ChaosRun, run_id: str, status: str | None) -> Audit:
        """The audit of the run, its workload's (the one verdict `status` and the app show too); the lead
        run's is kept for the printed report."""
        audit = await self.workload.audit(chaos.settings, chaos.client, run_id, status)
        if run_id == chaos.run_ids[0]:
            self.lead_audit = audit
        return audit

    def hop(self, chaos: ChaosRun, upstream: str) -> Hop | None:
        """The gRPC hop between the workers and Temporal (proof/nemeses/hop.py), if the run needs one: at load
        with workers killed, to fail the attempts each death held at once (handed.py); crash points too."""
        if chaos.runs > 1 and any(kills_worker(ev.kind) for ev in chaos.schedule):
            return watching_hop(chaos.settings, upstream)
        return None

    def http_logs(self, chaos: ChaosRun) -> dict[str, HttpLog]:
        """{dependency name: its proxy's log} for the http: destinations (--effects http:NAME:FIELD)."""
        return {}

    def ended_at(self, chaos: ChaosRun) -> float | None:
        """When the last of the runs closed, from history (None: not known, or one is still open)."""
        return None

    def read_destinations(self, chaos: ChaosRun) -> list:
        """What each destination of the workload's effects (--effects) holds now, in its order: the run is
        read against it afterwards. Our loop's outbox is audited by its own audit."""
        return []

    async def at_destination(self, chaos: ChaosRun, before: list) -> None:
        """What the destinations gained since `before`, kept for each run's audit."""

    def stalls(self, chaos: ChaosRun, run_id: str) -> None:
        """Fill in each fired event's restart_s / stalled_s / recovery_s from durable data."""

    def figures(self, chaos: ChaosRun, run_id: str) -> TargetFigures | None:
        """Report keys of this workload's own."""
        return None

    def checks(self, audit: Audit) -> list[Check]:
        raise NotImplementedError

    def lines(self, report: ChaosReport) -> list[str]:
        raise NotImplementedError

    def reset_summary(self, r: Fired) -> str:
        """What a fired reset (as the report has it) ran again and what the ledger answered, on one line."""
        raise NotImplementedError


async def until(cond: Callable[[], bool], timeout: float = PROGRESS_TIMEOUT_S) -> None:
    try:
        await wait_until(cond, timeout, every=0.01, what="chaos: the run's next event")
    except TimeoutError:
        raise Failed("chaos: the run stopped making progress (see run/worker.log, run/temporal.log)") from None
