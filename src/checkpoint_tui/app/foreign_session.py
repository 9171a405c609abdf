"""The app's session on a user's own worker (`checkpoint-tui --worker-cmd CMD --task-queue Q`): the lab
session as it is (the supervisor runs and kills the user's command, the ledger pane shows the
effects library's rows, history and worker events as always), with the timeline made of the viewed
run's activity executions read from Temporal history: one row per activity in scheduling order
(type, attempt, the worker identity that ran it, duration, where the run resumed on another worker).
"""

from __future__ import annotations

import time
from typing import Any

from checkpoint_tui.app.foreign_history import ActivityExec, read_activities
from checkpoint_tui.app.foreign_runs import NO_INPUT, is_foreign, record_end, start_foreign_run
from checkpoint_tui.app.session import LabSession
from checkpoint_tui.app.view import Snapshot, View
from checkpoint_tui.errors import Failed
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.rows import StepRow
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.settings import Settings

ACTIVITIES_EVERY_S = 0.5  # history is re-read at most this often (a user's run is short; see README)
STATUS = {"completed": "completed", "running": "running", "failed": "failed", "timed-out": "failed",
          "canceled": "cancelled", "scheduled": "scheduled"}  # fmt: skip


def step_row(a: ActivityExec) -> StepRow:
    """An activity execution in the timeline's row shape: step = its place in the run, provider = its type
    (with the worker identity when it is not the SDK's default `pid@host`, whose pid the pid column shows)."""
    kind = a.activity_type if a.worker_pid is not None or not a.identity else f"{a.activity_type} @ {a.identity}"
    return StepRow(
        step=a.seq, status=STATUS.get(a.status, a.status), attempt=a.attempt, worker_pid=a.worker_pid,
        started_pid=None, provider=kind, action=None, thought=None, tool_result=None, tokens=None,
        cost_usd=None, started_at=a.started_at, ended_at=a.closed_at, error=a.last_failure, raw_output=None,
        worker_host=a.worker_host,
    )  # fmt: skip


class ForeignSession(LabSession):
    def __init__(self, settings: Settings, workflow: str | None = None, arg: Any = NO_INPUT) -> None:
        super().__init__(settings)
        self.workflow, self.arg = workflow, arg  # what `n` starts (--workflow / --input given to the app)
        self._acts: tuple[str, float, list[ActivityExec]] | None = None  # (run, when read, activities)
        self._rows: dict[int, StepRow] = {}  # the rows last delivered for the viewed run
        self._foreign_runs: dict[str, bool] = {}
        self._completion_text: dict[str, str] = {}

    async def poll(self) -> View:
        view = await super().poll()
        run_id = view.snapshot.run_id
        if run_id is None or self.client is None or not await self._is_foreign(run_id):
            return view
        acts = await self._activities(run_id)
        self._apply(view, acts)
        view.completion = await self._activity_completion(view.snapshot, acts)
        return view

    async def _is_foreign(self, run_id: str) -> bool:
        if run_id not in self._foreign_runs:
            row = await self._db(lambda: queries.run(connect(self.settings.ledger), run_id))
            self._foreign_runs[run_id] = row is not None and is_foreign(row.provider)
        return self._foreign_runs[run_id]

    async def _activities(self, run_id: str) -> list[ActivityExec]:
        cached = self._acts
        fresh = cached is not None and cached[0] == run_id
        if fresh and (run_id in self._completion_text or time.monotonic() - cached[1] < ACTIVITIES_EVERY_S):
            return cached[2]  # a closed run's history no longer changes
        assert self.client is not None
        acts = await read_activities(self.client, run_id)
        self._acts = (run_id, time.monotonic(), acts)
        return acts

    def _apply(self, view: View, acts: list[ActivityExec]) -> None:
        """The snapshot's step rows and figures from the activities; only changed rows after the first."""
        snap: Snapshot = view.snapshot
        if view.run_changed:
            self._rows = {}
        rows = [step_row(a) for a in acts]
        snap.steps = [r for r in rows if self._rows.get(r.step) != r]
        self._rows.update({r.step: r for r in snap.steps})
        snap.total_steps, snap.completed_steps = len(acts), sum(a.status == "completed" for a in acts)
        snap.resumed_steps, snap.missing_steps = [a.seq for a in acts if a.resumed], []
        snap.partial = not view.run_changed

    async def _activity_completion(self, snap: Snapshot, acts: list[ActivityExec]) -> str | None:
        """The completion sentence, in activities, once the workflow is over (computed once per run)."""
        run_id = snap.run_id or ""
        if snap.final_state is None:
            return None
        if run_id not in self._completion_text:
            workers = len({a.identity for a in acts if a.status == "completed" and a.identity})
            sentence = snap.completion_sentence(workers) or ""
            self._completion_text[run_id] = sentence.replace(" steps,", " activities,", 1)
            if snap.workflow_status:  # the run row's end: nothing in a user's worker writes it
                await self._db(record_end, self.settings, run_id, snap.workflow_status)
        return self._completion_text[run_id]

    async def new_run(self, steps: int, pace: float) -> str:
        """`n`: start the workflow given with --workflow / --input (the step count and pace are ours)."""
        if self.client is None:
            raise Failed("not connected to Temporal yet")
        if self.workflow is None:
            raise Failed("start a run with: checkpoint-tui --worker-cmd ... start --workflow TYPE --input JSON "
                         "(or open the app with --workflow TYPE --input JSON)")  # fmt: skip
        self.run_id = await start_foreign_run(self.settings, self.client, self.workflow, self.arg)
        return self.run_id

    async def step_detail(self, run_id: str, step: int):
        return None  # a user's activity has no step row to inspect; the history pane has its events
