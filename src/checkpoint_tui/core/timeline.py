"""How the app reads a run of a workload (core/workload.py `Workload.timeline`): the timeline's rows, the
completion sentence once the run is over, and the inspector's detail of one unit. Our loop's rows are
the ledger's step rows, which every poll's snapshot already holds (`StepTimeline`); a user's workflow's
are its activities, read from Temporal history (core/activity_timeline.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from temporalio.client import Client

from checkpoint_tui.core.runs import LedgerCall
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.core.view import RunCounts, Snapshot, View
from checkpoint_tui.ledger import inspect_queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.inspect_queries import StepDetail
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.settings import Settings


class Timeline(ABC):
    """One per viewed run (it may keep what it read of the run between polls)."""

    @abstractmethod
    async def apply(self, client: Client, view: View) -> None:
        """Fill in the view's rows and figures from the run's own source."""

    @abstractmethod
    async def completion(self, settings: Settings, client: Client, snap: Snapshot, db: LedgerCall) -> str | None:
        """The completion sentence of a run that is over (asked once per run); `db` runs ledger reads."""

    @abstractmethod
    def detail(self, conn: Ledger, run_id: str, unit: int) -> StepDetail | None:
        """One unit in full for the inspector (on the ledger thread)."""

    def counts(self) -> RunCounts | None:
        """The counts of the audit the completion sentence came from (one verdict, one source); None:
        the timeline's counts are the ledger's, shown live (our loop)."""
        return None


class StepTimeline(Timeline):
    """Our loop: the ledger's step rows are the timeline, and the ledger's figures its sentence."""

    async def apply(self, client: Client, view: View) -> None:
        """Nothing to add: the poll's snapshot holds the step rows."""

    async def completion(self, settings: Settings, client: Client, snap: Snapshot, db: LedgerCall) -> str | None:
        """The ledger's figures read again once the run is known to have ended, and the worker processes
        that completed a step. Not the figures of the poll that saw it end: a poll reads the ledger
        before Temporal's status, so a run whose last step was stamped between the two reads showed
        `3 of 4 steps` beside `completed`, and the sentence said NOT exactly once, for good (seen in
        tests/test_tui_workloads.py under a loaded suite). Each step is stamped before its activity
        returns, so a read after the workflow ended holds every step it completed."""
        run_id = snap.run_id or ""

        def read() -> tuple[Snapshot, int]:
            conn = connect(settings.ledger)
            ended = build_snapshot(conn, settings, run_id, snap.workflow_status, with_events=0)
            return ended, inspect_queries.finisher_count(conn, run_id)

        ended, finishers = await db(read)
        return ended.completion_sentence(finishers)

    def detail(self, conn: Ledger, run_id: str, unit: int) -> StepDetail | None:
        return inspect_queries.step_detail(conn, run_id, unit)
