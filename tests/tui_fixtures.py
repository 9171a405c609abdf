"""Fixed data for TUI snapshot tests: a session whose polls return prepared Views (no processes)."""

from __future__ import annotations

import html
import json
import re

from checkpoint_tui.core.lesson import LessonView
from checkpoint_tui.core.lesson_sides import SideView
from checkpoint_tui.core.pending_activity import PendingActivity
from checkpoint_tui.core.view import HistoryEvent, Snapshot, View
from checkpoint_tui.core.workload import Workload
from checkpoint_tui.ledger.inspect_queries import ActivityAttempt, KillEvent, StepDetail
from checkpoint_tui.ledger.rows import ClaimAttempt, EffectRow, StepRow, WorkerEvent
from checkpoint_tui.ops.state import KillReport, SupervisorState
from checkpoint_tui.settings import HOST
from checkpoint_tui.workloads import AgentLoopWorkload

T0 = 1_795_000_000.0  # a fixed clock
RUN = "run-20261129-120000-abcd"


class FixedSession:
    def __init__(self, view: View, workload: Workload | None = None) -> None:
        self.view = view
        self.workload = workload or AgentLoopWorkload()  # what `n` starts
        self.polls = 0
        self.planned: list = []
        self.inspected: list[tuple[str, int]] = []
        self.lessons: list[FixedLesson] = []

    async def boot(self) -> None:
        return None

    async def poll(self) -> View:
        self.polls += 1
        view = self.view
        if self.polls > 1:  # history, kills and fleet events are incremental: later polls bring no new ones
            view = View(**{**view.__dict__, "history": [], "kills": [], "marks": [], "run_changed": False})
        return view

    async def new_run(self, steps: int, pace: float) -> str:
        return RUN

    async def kill(self) -> KillReport:
        """`k` on fixed data: the report of the newest kill the View's worker events recorded (the
        supervisor writes its row from that report), else a refusal."""
        kill = next((e for e in reversed(self.view.snapshot.worker_events) if e.event == "kill"), None)
        if kill is None or kill.pid is None:
            raise RuntimeError("fixed data: nothing to kill")
        d = json.loads(kill.detail or "{}")
        return KillReport(
            kill.pid,
            d.get("signal"),
            d.get("exit_code"),
            bool(d.get("confirmed")),
            kill.run_id,
            kill.step,
            kill.at,
            bool(d.get("observed")),
        )

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
        from checkpoint_tui.core.comparison import Comparison, Side

        return Comparison(6, 3, Side("naive-x", 9, 3, 3, None), Side(RUN, 6, 0, 0, 0))

    async def run_chaos(self, seed: int, steps: int = 12, kills: int = 6, on_line=None) -> dict:
        """What chaos prints and writes, fixed: its schedule, its run, its report."""
        for line in CHAOS_LINES:
            if on_line is not None:
                on_line(line)
        return CHAOS_REPORT

    async def chaos_progress(self, run_id: str) -> int:
        return 7

    async def step_detail(self, run_id: str, step: int) -> StepDetail | None:
        """The step from the fixed View, with its effects, claims and attempts made up alike."""
        self.inspected.append((run_id, step))
        row = next((s for s in self.view.snapshot.steps if s.step == step), None)
        if row is None:
            return None
        effs = [
            EffectRow(e.id, e.step, e.kind, e.attempt, e.claimed_at, e.applied_at, e.outcomes, PAYLOADS[e.kind](step))
            for e in self.view.snapshot.effects
            if e.step == step
        ]
        claims = [
            ClaimAttempt(i, e.id, step, e.kind, 1, row.worker_pid or 0, None, o, e.claimed_at, e.applied_at)
            for i, e in enumerate(effs)
            for o in e.outcomes.split(",")
        ]
        attempts = [ActivityAttempt("mark_step_running", 1, row.started_pid or 0, None, row.started_at or T0)]
        if row.started_pid != row.worker_pid:
            attempts.append(ActivityAttempt("llm", 1, row.started_pid or 0, None, (row.started_at or T0) + 0.05))
        for n, name in enumerate(("llm", "tool", "effect", "mark_step_completed")):
            attempt = 2 if name == "llm" and row.started_pid != row.worker_pid else 1
            attempts.append(
                ActivityAttempt(name, attempt, row.worker_pid or 0, None, (row.started_at or T0) + 0.1 * n + 0.1)
            )
        note = "truncated; repaired" if step in self.view.snapshot.truncated_steps else "offline"
        return StepDetail(run_id, row, note, effs, claims, attempts)

    def lesson(self) -> FixedLesson:
        self.lessons.append(FixedLesson())
        return self.lessons[-1]

    async def shutdown(self, stop_everything: bool = False) -> None:
        return None


class FixedLesson:
    """The step-through lesson on fixed data: one view (mid-lesson: the naive loop killed after step 2
    and restarted, sending steps 1-2 again; the durable run killed after step 2 and finished), and a
    record of the actions asked for."""

    def __init__(self, view: LessonView | None = None) -> None:
        self.fixed = view or lesson_view()
        self.actions: list[tuple[str, str]] = []
        self.closed = False

    async def act(self, side: str, action: str) -> str:
        self.actions.append((side, action))
        return f"{side}: {action.replace('_', ' ')} (fixed data)"

    async def view(self) -> LessonView:
        return self.fixed

    async def start_over(self) -> str:
        self.actions.append(("both", "start_over"))
        return "started over (fixed data)"

    async def close(self) -> None:
        self.closed = True


def lesson_view() -> LessonView:
    naive = SideView(
        "naive-20261129-120000-beef",
        4,
        6,
        2,
        None,
        "pid 5230 gone · no record of its progress survives",
        "finished: pid 5230 did 4 steps, then exited",
        (
            "started process 5207 (progress in its memory)",
            "step 1 done (pid 5207 remembers it)",
            "step 2 done (pid 5207 remembers it)",
            "SIGKILL pid 5207 after step 2 · observed SIGKILL",
            "restarted as 5230: it starts again from step 1 (pid 5207 is gone)",
            "pid 5230 did steps 1-4",
        ),
    )
    durable = SideView(
        RUN,
        4,
        4,
        0,
        0,
        "worker pid 4180 · at step 4/4 (from the ledger)",
        "run completed · 4 steps, each once",
        (
            "step 1 done · recorded in Temporal's history and the ledger",
            "step 2 done · recorded in Temporal's history and the ledger",
            "SIGKILL worker 4121 · observed SIGKILL · gone=True",
            "the supervisor put worker 4180 in its place",
            "gate opened to step 4 · it resumes after step 2",
            "run completed on worker 4180",
        ),
    )
    return LessonView(4, naive, durable)


PAYLOADS = {
    "file": lambda n: f"# Step {n:03d} of 8\n\n- run: {RUN}\n- action: compute\n- thought: [bold]compute[/] it\n",
    "db": lambda n: f"step {n}: {n} + {42 - n} = 42",
    "email": lambda n: f"to=operator@example.invalid\tsubject=step {n}/8 done: {n} + {42 - n} = 42",
}


def step(n: int, status: str = "completed", pid: int = 4121, attempt: int = 1, **kw) -> StepRow:
    start = T0 + n
    return StepRow(
        step=n,
        status=status,
        attempt=attempt,
        worker_pid=pid,
        started_pid=kw.pop("started_pid", pid),
        provider="offline",
        action="compute",
        thought="compute the next figure",
        tool_result="42",
        tokens=80 + n,
        cost_usd=0.0,
        started_at=start,
        ended_at=start + 0.5 if status == "completed" else None,
        error=kw.pop("error", None),
        raw_output=kw.pop("raw_output", None),
    )


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
    names = [
        "WORKFLOW_EXECUTION_STARTED",
        "WORKFLOW_TASK_SCHEDULED",
        "WORKFLOW_TASK_STARTED",
        "WORKFLOW_TASK_COMPLETED",
        "ACTIVITY_TASK_SCHEDULED",
        "ACTIVITY_TASK_STARTED",
        "ACTIVITY_TASK_COMPLETED",
    ]
    return [
        HistoryEvent(i, T0 + i * 0.01, names[min(i - 1, len(names) - 1)], f"attempt=1 [bold]x[/] {i}")
        for i in range(1, n + 1)
    ]


def view(snapshot: Snapshot, **kw) -> View:
    base = dict(
        snapshot=snapshot,
        history=[],
        run_changed=True,
        address="127.0.0.1:7233",
        ui_url="http://127.0.0.1:8233",
        namespace="default",
        supervisor_state=SupervisorState.RUNNING,
        worker_pid=4121,
        spare_pid=4122,
        owns_home=True,
        planned_faults=[],
    )
    base.update(kw)
    return View(**base)


def snap(steps: list[StepRow], total: int, status: str = "RUNNING", **kw) -> Snapshot:
    effs = kw.pop("effects", None) or effects(steps)
    s = Snapshot(
        run_id=RUN,
        total_steps=total,
        run_status=kw.pop("run_status", "running"),
        workflow_status=status,
        provider="offline",
        pace=1.0,
        steps=steps,
        effects=effs,
        ledger_rows=len(effs),
        duplicates=0,
        outcome_counts={"applied": len(effs), "skipped": 0, "recovered": 0, "interrupted": 0},
        outbox_lines=len([e for e in effs if e.kind == "email"]),
        notes_rows=len(effs) // 3,
        artifact_files=len(effs) // 3,
        worker_events=kw.pop("events", []),
    )
    s.resumed_steps = [b.step for a, b in zip(steps, steps[1:], strict=False) if a.worker_pid != b.worker_pid]
    s.completed_steps = sum(1 for x in steps if x.status == "completed")
    s.missing_steps = [i for i in range(1, total + 1) if i > s.completed_steps]
    s.guardrail_step = next((x for x in steps if x.status == "failed" and x.raw_output), None)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def silent_worker_view() -> View:
    """A run whose worker went quiet in step 7's model call: Temporal last heard from it 2.3 s ago."""
    v = running_view()
    v.pending = PendingActivity("llm", 1, "STARTED", f"w-964d45@{HOST}", 2.34, True)
    return v


def empty_view() -> View:
    return view(Snapshot(run_id=None), worker_pid=4121)


def running_view() -> View:
    steps = [step(i) for i in range(1, 7)] + [step(7, "running")]
    events = [WorkerEvent(1, T0, "spawn", 4121, None, None, "active worker", None, None)]
    return view(snap(steps, 30, events=events), history=history(12))


def after_kill_view() -> View:
    """A 30-step run a second after `k` in step 7's model call, as the app shows it live: step 7 ran
    again on the promoted spare 4180 (attempt 2) and step 8 is running there; the worker events as the
    supervisor writes them (the spawns, the kill, the promotion, the assist, a new spare); the history
    up to step 8's model call, with the kill's marker line in step 7."""
    steps = (
        [step(i) for i in range(1, 7)]
        + [step(7, pid=4180, started_pid=4121, attempt=2)]
        + [step(8, "running", pid=4180)]
    )
    kill_at = T0 + 7.2
    kill = json.dumps(
        {
            "pid": 4121,
            "signal": "SIGKILL",
            "exit_code": None,
            "confirmed": True,
            "run_id": RUN,
            "step": 7,
            "at": kill_at,
            "observed": True,
            "reason": "user",
        }
    )
    assist = json.dumps({"failed_activities": [], "sticky_reset": None})
    events = [
        WorkerEvent(1, T0, "spawn", 4121, None, None, "active worker (slot 0)", None, None),
        WorkerEvent(2, T0 + 0.05, "spawn", 4180, None, None, "warm spare (standby)", None, None),
        WorkerEvent(3, kill_at, "kill", 4121, RUN, 7, kill, 0.142, 0.81),
        WorkerEvent(4, kill_at + 0.01, "promote", 4180, RUN, 7, "replaces 4121", None, None),
        WorkerEvent(5, kill_at + 0.03, "assist", 4121, None, None, assist, None, None),
        WorkerEvent(6, kill_at + 0.2, "spawn", 4190, None, None, "warm spare (standby)", None, None),
    ]
    s = snap(steps, 30, events=events)
    s.outcome_counts = {"applied": 21, "skipped": 0, "recovered": 0, "interrupted": 0}
    marker = KillEvent(3, kill_at, "kill", 4121, None, f"w-964d45@{HOST}", 7, "SIGKILL", "llm", 1, 7)
    live = [e for e in step_history(8, 7, kill_at) if e.time <= T0 + 8.115]  # step 8: its model call in flight
    return view(s, worker_pid=4180, spare_pid=4190, history=live, kills=[marker])


GARBLE = "Sure! [bold]Here[/] is my plan: first I will [red]explain[/red] at length \\[not json] {oops"


def guardrail_view() -> View:
    steps = [step(1), step(2), step(3, "failed", error="Guardrail: step 3 returned non-JSON output", raw_output=GARBLE)]
    s = snap(steps, 5, status="FAILED", run_status="failed", run_error="Guardrail: step 3 returned non-JSON output")
    return view(s, history=history(8), completion=s.completion_sentence())


def step_history(steps: int, kill_step: int | None = None, kill_at: float | None = None) -> list[HistoryEvent]:
    """A run's history as Temporal writes it: per step a workflow task, then llm / tool / effect each
    scheduled, started and completed; the activity in flight at `kill_at` gets attempt 2 after it."""
    events: list[HistoryEvent] = []

    def add(t: float, name: str, attrs: str) -> int:
        events.append(HistoryEvent(len(events) + 1, t, name, attrs))
        return len(events)

    add(T0 + 0.9, "WORKFLOW_EXECUTION_STARTED", "AgentLoopWorkload attempt=1")
    for n in range(1, steps + 1):
        t = T0 + n
        for i, name in enumerate(("WORKFLOW_TASK_SCHEDULED", "WORKFLOW_TASK_STARTED", "WORKFLOW_TASK_COMPLETED")):
            add(t + i * 0.005, name, "")
        start = t + 0.02
        for j, activity in enumerate(("llm", "tool", "effect")):
            sched = add(start, "ACTIVITY_TASK_SCHEDULED", f"{activity} activity_id={3 * n + j}")
            killed = n == kill_step and activity == "llm" and kill_at is not None
            done = start + (0.1 if not killed else 0.45)
            start = done + 0.01
            attempt = 2 if killed else 1
            started = add(done - 0.01, "ACTIVITY_TASK_STARTED", f"attempt={attempt} scheduled_event_id={sched}")
            add(done, "ACTIVITY_TASK_COMPLETED", f"scheduled_event_id={sched} started_event_id={started}")
    add(T0 + steps + 0.6, "WORKFLOW_EXECUTION_COMPLETED", "")
    return sorted(events, key=lambda e: (e.time, e.event_id))


def completed_after_kill_view() -> View:
    """An 8-step run that lost its worker in step 4's model call and finished on the warm spare."""
    steps = [step(i) for i in range(1, 4)] + [step(4, pid=4180, started_pid=4121, attempt=2)]
    steps += [step(i, pid=4180) for i in range(5, 9)]
    kill_at = T0 + 4.3
    detail = json.dumps({"signal": "SIGKILL", "exit_code": None, "observed": True, "confirmed": True})
    events = [
        WorkerEvent(1, T0, "spawn", 4121, None, None, "active worker", None, None),
        WorkerEvent(2, kill_at, "kill", 4121, RUN, 4, detail, 0.142, 0.81),
        WorkerEvent(3, kill_at + 0.01, "promote", 4180, RUN, 4, "replaces 4121", None, None),
    ]
    s = snap(steps, 8, status="COMPLETED", run_status="completed", events=events, truncated_steps=[6])
    s.missing_steps = []
    kill = KillEvent(2, kill_at, "kill", 4121, None, f"w-964d45@{HOST}", 4, "SIGKILL", "llm", 1, 4)
    sentence = s.completion_sentence(2)
    return view(
        s, worker_pid=4180, spare_pid=4190, history=step_history(8, 4, kill_at), kills=[kill], completion=sentence
    )


CHAOS_LINES = [
    "chaos seed=4242 steps=12 schedule:",
    "  step    2: worker-kill +120 ms",
    "  step    4: claim-window-crash (email) +0 ms",
    "  step    6: supervisor-kill +300 ms",
    "  step    8: devserver-kill +80 ms",
    "  step   10: worker-kill +450 ms",
    "  step   11: claim-window-crash (file) +0 ms",
    "run run-20261129-120500-c0de",
]
CHAOS_REPORT = {
    "seed": 4242,
    "steps": 12,
    "median_restart_s": 0.16,
    "wall_s": 21.4,
    "audit": {
        "workflow_status": "COMPLETED",
        "total_steps": 12,
        "step_gaps": [],
        "claims_attempted": 38,
        "applied": 36,
        "skipped": 1,
        "recovered": 1,
        "interrupted": 1,
        "lost": 0,
        "duplicated": 0,
        "ok": True,
    },
    "kills": [
        {"kind": "worker-kill", "step": 2, "pid": 5101, "restart_s": 0.15},
        {"kind": "claim-window-crash", "step": 4, "pid": 5140, "restart_s": 0.17},
        {"kind": "supervisor-kill", "step": 6, "pid": 5090, "restart_s": None},
        {"kind": "devserver-kill", "step": 8, "pid": 5001, "restart_s": 2.1},
        {"kind": "worker-kill", "step": 10, "pid": 5177, "restart_s": 0.16},
        {"kind": "claim-window-crash", "step": 11, "pid": 5190, "restart_s": 0.18},
    ],
}


def two_kills_view() -> View:
    """The run of completed_after_kill_view with a second kill, in step 7's tool call."""
    v = completed_after_kill_view()
    second = KillEvent(3, T0 + 7.16, "kill", 4180, None, f"w-1a2b3c@{HOST}", 7, "SIGKILL", "tool", 1, 7)
    return View(**{**v.__dict__, "kills": [*v.kills, second]})


SVG_CELL_WIDTH = 12.2  # Textual's SVG export: 0.61 × a 20 px font
SVG_TEXT = re.compile(r'<text [^>]*?x="([\d.]+)"[^>]*?clip-path="url\(#[\w-]*?line-(\d+)\)">([^<]*)</text>')


def screen_lines(app) -> list[str]:
    """The screen as text, one string per terminal line, read from the app's own SVG export (each text
    element at its column: cells that are only background have no text element)."""
    svg = app.export_screenshot()
    lines: dict[int, dict[int, str]] = {}
    for x, line, text in SVG_TEXT.findall(svg):
        lines.setdefault(int(line), {})[round(float(x) / SVG_CELL_WIDTH)] = (
            html.unescape(text).replace("\xa0", " ").replace("\n", "")
        )
    out = []
    for n in range(max(lines, default=-1) + 1):
        row = ""
        for col, text in sorted(lines.get(n, {}).items()):
            row = row.ljust(col) + text
        out.append(row.rstrip())
    return out
