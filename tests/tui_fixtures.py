"""Fixed data for TUI snapshot tests: a session whose polls return prepared Views (no processes)."""

from __future__ import annotations

import json

from checkpoint_tui.app.view import HistoryEvent, Snapshot, View
from checkpoint_tui.ledger.rows import EffectRow, StepRow, WorkerEvent
from checkpoint_tui.ops.state import SupervisorState

T0 = 1_795_000_000.0  # a fixed clock
RUN = "run-20261129-120000-abcd"


class FixedSession:
    def __init__(self, view: View) -> None:
        self.view = view
        self.polls = 0
        self.planned: list = []

    async def boot(self) -> None:
        return None

    async def poll(self) -> View:
        self.polls += 1
        view = self.view
        if self.polls > 1:  # history is incremental: later polls bring no new events
            view = View(**{**view.__dict__, "history": [], "run_changed": False})
        return view

    async def new_run(self, steps: int, pace: float) -> str:
        return RUN

    async def kill(self):
        raise RuntimeError("fixed data: nothing to kill")

    async def cancel(self) -> None:
        return None

    async def plan_fault(self, fault, for_current_run: bool) -> str:
        self.planned.append((fault, for_current_run))
        return RUN

    async def runs(self) -> list:
        return []

    def view_run(self, run_id: str) -> None:
        return None

    async def comparison(self):
        from checkpoint_tui.app.comparison import Comparison, Side

        return Comparison(6, 3, Side("naive-x", 9, 3, 3, None), Side(RUN, 6, 0, 0, 0))

    async def shutdown(self, stop_everything: bool = False) -> None:
        return None


def step(n: int, status: str = "completed", pid: int = 4121, attempt: int = 1, **kw) -> StepRow:
    start = T0 + n
    return StepRow(
        step=n, status=status, attempt=attempt, worker_pid=pid, started_pid=kw.pop("started_pid", pid),
        provider="offline", action="compute", thought="compute the next figure", tool_result="42",
        tokens=80 + n, cost_usd=0.0, started_at=start, ended_at=start + 0.5 if status == "completed" else None,
        error=kw.pop("error", None), raw_output=kw.pop("raw_output", None),
    )  # fmt: skip


def effects(steps: list[StepRow], recovered: int | None = None) -> list[EffectRow]:
    out = []
    for s in steps:
        if s.status != "completed":
            continue
        for kind in ("file", "db", "email"):
            outcome = "interrupted,recovered" if s.step == recovered and kind == "email" else "applied"
            t = s.started_at + 0.3
            out.append(EffectRow(f"{RUN}:{s.step}:{kind}", s.step, kind, 1, t, t + 0.001, outcome))
    return out


def history(n: int) -> list[HistoryEvent]:
    names = ["WORKFLOW_EXECUTION_STARTED", "WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED",
             "WORKFLOW_TASK_COMPLETED", "ACTIVITY_TASK_SCHEDULED", "ACTIVITY_TASK_STARTED",
             "ACTIVITY_TASK_COMPLETED"]  # fmt: skip
    return [
        HistoryEvent(i, T0 + i * 0.01, names[min(i - 1, len(names) - 1)], f"attempt=1 [bold]x[/] {i}")
        for i in range(1, n + 1)
    ]


def view(snapshot: Snapshot, **kw) -> View:
    base = dict(
        snapshot=snapshot, history=[], run_changed=True, address="127.0.0.1:7233",
        ui_url="http://127.0.0.1:8233", namespace="default", supervisor_state=SupervisorState.RUNNING,
        worker_pid=4121, spare_pid=4122, owns_home=True, planned_faults=[],
    )  # fmt: skip
    base.update(kw)
    return View(**base)


def snap(steps: list[StepRow], total: int, status: str = "RUNNING", **kw) -> Snapshot:
    effs = kw.pop("effects", None) or effects(steps)
    s = Snapshot(
        run_id=RUN, total_steps=total, run_status=kw.pop("run_status", "running"), workflow_status=status,
        provider="offline", pace=1.0, steps=steps, effects=effs, ledger_rows=len(effs), duplicates=0,
        outcome_counts={"applied": len(effs), "skipped": 0, "recovered": 0, "interrupted": 0},
        outbox_lines=len([e for e in effs if e.kind == "email"]), notes_rows=len(effs) // 3,
        artifact_files=len(effs) // 3, worker_events=kw.pop("events", []),
    )  # fmt: skip
    s.resumed_steps = [b.step for a, b in zip(steps, steps[1:], strict=False) if a.worker_pid != b.worker_pid]
    s.completed_steps = sum(1 for x in steps if x.status == "completed")
    s.missing_steps = [i for i in range(1, total + 1) if i > s.completed_steps]
    s.guardrail_step = next((x for x in steps if x.status == "failed" and x.raw_output), None)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def empty_view() -> View:
    return view(Snapshot(run_id=None), worker_pid=4121)


def running_view() -> View:
    steps = [step(i) for i in range(1, 7)] + [step(7, "running")]
    events = [WorkerEvent(1, T0, "spawn", 4121, None, None, "active worker", None, None)]
    return view(snap(steps, 30, events=events), history=history(12))


def after_kill_view() -> View:
    steps = (
        [step(i) for i in range(1, 7)]
        + [step(7, pid=4180, started_pid=4121, attempt=2)]
        + [step(8, "running", pid=4180)]
    )
    kill = json.dumps({"signal": "SIGKILL", "exit_code": None, "observed": True, "confirmed": True})
    events = [
        WorkerEvent(1, T0, "spawn", 4121, None, None, "active worker", None, None),
        WorkerEvent(2, T0 + 7.2, "kill", 4121, RUN, 7, kill, 0.142, 0.81),
        WorkerEvent(3, T0 + 7.21, "promote", 4180, RUN, 7, "replaces 4121", None, None),
    ]
    s = snap(steps, 30, events=events)
    s.outcome_counts = {"applied": 21, "skipped": 0, "recovered": 0, "interrupted": 0}
    return view(s, worker_pid=4180, spare_pid=4190, history=history(12))


GARBLE = "Sure! [bold]Here[/] is my plan: first I will [red]explain[/red] at length \\[not json] {oops"


def guardrail_view() -> View:
    steps = [step(1), step(2), step(3, "failed", error="Guardrail: step 3 returned non-JSON output", raw_output=GARBLE)]
    s = snap(steps, 5, status="FAILED", run_status="failed", run_error="Guardrail: step 3 returned non-JSON output")
    return view(s, history=history(8))
