"""A lab session: what the TUI drives, with no Textual in it. It boots the dev server, the client and
the embedded supervisor (on its own thread), and turns durable data into one `View` per poll.

The caller's event loop (Textual's) only awaits: every ledger read and write runs on the session's
one ledger thread, the supervisor's tick on the supervisor's thread, Temporal calls are async."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from temporalio.client import Client

from checkpoint_tui.core.comparison import Comparison, read_comparison
from checkpoint_tui.core.fleet_view import BacklogRead, FleetWatch
from checkpoint_tui.core.history import HistoryFollower
from checkpoint_tui.core.lesson import Lesson
from checkpoint_tui.core.mark_feed import MarkFeed
from checkpoint_tui.core.pending_activity import PendingActivity, describe_run
from checkpoint_tui.core.runs import cancel_run
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.core.stuck import STUCK_ATTEMPT, stuck_task
from checkpoint_tui.core.tick_stats import CountingLedger, TickStats
from checkpoint_tui.core.timeline import Timeline
from checkpoint_tui.core.view import HistoryEvent, RunCounts, Snapshot, View
from checkpoint_tui.core.workload import Workload
from checkpoint_tui.errors import Failed
from checkpoint_tui.ledger import faults, queries
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.inspect_queries import FleetEvent, KillEvent, StepDetail
from checkpoint_tui.ledger.rows import RunSummary
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.devserver import DevServer, stop_devserver
from checkpoint_tui.ops.state import KillReport
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.settings import Settings

SINCE_MARGIN_S = 2.0
STATUS_EVERY_S = 2.0
PENDING_EVERY_S = 1.0  # while a step is in flight the same describe also brings its heartbeat age
EVENTS_REREAD = 20
HISTORY_PACE_S = 1.0  # the history pane shows new events at most once a second anyway
PIPE_DRAIN_S = 2.0  # after a proving tool exits, how long its printed lines may still be read
NEXT_RUN = "next"  # faults planned for the next run are stored under this run id until it starts
T = TypeVar("T")


class LabSession:
    def __init__(self, settings: Settings, workload: Workload, backlog: BacklogRead | None = None) -> None:
        """`backlog`: how to read the task queues' backlog from Temporal (the TUI hands in proof's sampler)."""
        self.settings = settings
        self.workload = workload  # what `n` starts; a recorded run is read as the workload its row names
        self._timelines: dict[str, Timeline] = {}  # each viewed run's, as its own workload reads it
        self._stuck: dict[str, str] = {}  # runs whose workflow task keeps failing: what it says
        self.address = ""
        self.server: DevServer | None = None
        self.client: Client | None = None
        self.supervisor: Supervisor | None = None
        self.run_id: str | None = None
        self._history: HistoryFollower | None = None
        # One thread for all of this session's ledger reads and writes: one connection, so its
        # data_version tells whether anything was committed since the last poll.
        self._db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self._last: tuple[str | None, object, Snapshot] | None = None  # (run, data_version, snapshot)
        self._since: float | None = None
        self._final_status: dict[str, str] = {}  # a closed workflow's status never changes: asked once
        self._status_asked: tuple[float, str | None, PendingActivity | None] | None = None  # when, what
        self._running_steps: set[int] = set()  # the viewed run's steps the ledger last showed running
        self._planned: list[str] = []
        self._last_run_status: str | None = None
        self._last_event_id = 0  # the newest worker event delivered
        self._history_requests = 0
        self.history_pace_s = HISTORY_PACE_S
        self._completion: dict[str, str] = {}  # run -> its completion sentence (a finished run's never changes)
        self._counts: dict[str, RunCounts] = {}  # run -> the counts of the audit its sentence came from
        self._marks = MarkFeed()  # kills and fleet events for the history
        self._fleet = FleetWatch(settings, backlog)

    async def _db(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._db_thread, fn, *args)

    async def boot(self) -> None:
        self.settings.ensure_dirs()
        self.address, self.server = await asyncio.to_thread(resolve_address, self.settings)
        self.client = await connect_client(self.settings, self.address)
        sup = Supervisor(self.settings, self.address)
        sup.acquire()  # if another supervisor owns the home we only observe (no respawn, no spare)
        await asyncio.to_thread(sup.ensure_worker)
        # the run to show is known before the session reads as booted (supervisor set): a caller that
        # waits for the supervisor sees the run it re-attached to, never None in between
        self.run_id = await self._db(lambda: queries.latest_run_id(connect(self.settings.ledger)))
        self.supervisor = sup
        sup.start()  # shutdown() stops it

    async def poll(self) -> View:
        """One View. The first poll of a run carries all its rows; later ones only rows written since
        the previous poll began (minus a margin for writes committed just after they were stamped).
        The run's workload fills in what it reads elsewhere (a user's workflow: its activities from
        history) and, once the run is over, its completion sentence."""
        view = await self._poll_lab()
        run_id = view.snapshot.run_id
        if run_id is not None and self.client is not None:
            timeline = await self._timeline(run_id)
            await timeline.apply(self.client, view)
            view.completion = await self._completion_of(run_id, view.snapshot, timeline)
            view.counts = self._counts.get(run_id)
        view.fleet, view.backlog = self._fleet.latest(self.client, view.stats)
        return view

    async def _timeline(self, run_id: str) -> Timeline:
        """The run's timeline, made once per run by the workload its row names."""
        if run_id not in self._timelines:
            row = await self._db(lambda: queries.run(connect(self.settings.ledger), run_id))
            try:
                workload = self.workload.of_run(row) if row is not None else self.workload
            except Failed:  # a kind this version does not know (a newer host's): its ledger rows as they are
                workload = self.workload
            self._timelines[run_id] = workload.timeline()
        return self._timelines[run_id]

    async def _poll_lab(self) -> View:
        run_id = self.run_id
        reset = self._history is None or self._history.run_id != run_id
        since = None if reset else self._since
        started = time.time()
        stats = TickStats()
        snap, planned, first_execution, changed, kills, marks = await self._db(self._read, run_id, since, reset, stats)
        if changed and self.supervisor is not None:
            self.supervisor.poke()  # a run started (here or elsewhere) or a fault planned: kill_at is armed now
        self._since = started - SINCE_MARGIN_S
        history: list[HistoryEvent] = []
        pending: PendingActivity | None = None
        if reset and self._history is not None:
            await self._history.stop()
            self._history = None
        if run_id is not None and self.client is not None:
            ended = snap.run_status != self._last_run_status  # e.g. finish_run wrote completed / failed
            self._last_run_status = snap.run_status
            live = self._step_in_flight(snap, reset)
            snap.workflow_status, pending = await self._workflow_status(run_id, ended or reset, live, stats)
            if self._history is None:
                self._history = HistoryFollower(self.client, run_id, first_execution, pace_s=self.history_pace_s)
                self._history_requests = 0
            self._history.ensure_following()
            history = self._history.drain()
            stats.temporal += self._history.requests - self._history_requests
            self._history_requests = self._history.requests
        status = self.supervisor.status if self.supervisor else None
        return View(
            snapshot=snap,
            history=history,
            run_changed=reset,
            address=self.address,
            ui_url=self.server.ui_url if self.server else None,
            namespace=self.settings.namespace,
            supervisor_state=status.state if status else View.supervisor_state,
            worker_pid=status.primary_pid if status else None,
            spare_pid=status.spare_pid if status else None,
            pool_pids=list(status.pool_pids) if status else [],
            ledger=self.settings.ledger_label if self.settings.ledger_url else None,
            owns_home=bool(status and status.owns_home),
            planned_faults=planned,
            stats=stats,
            kills=kills,
            pending=pending,
            quiet=not (changed or history or kills or marks or reset),
            stuck=self._stuck.get(run_id or ""),
            marks=marks,
        )

    async def _completion_of(self, run_id: str, snap: Snapshot, timeline: Timeline) -> str | None:
        """The completion sentence, asked of the run's timeline once, when its status turns terminal
        (a finished run's never changes). A user's workflow's comes from its audit, whose counts its
        timeline keeps beside it, so the two cannot disagree."""
        if snap.final_state is None or self.client is None:
            return None
        if run_id not in self._completion:  # "" once asked with nothing to say: not asked again
            self._completion[run_id] = await timeline.completion(self.settings, self.client, snap, self._db) or ""
            if (counts := timeline.counts()) is not None:
                self._counts[run_id] = counts
        return self._completion[run_id] or None

    async def step_detail(self, run_id: str, step: int) -> StepDetail | None:
        """One step (or a user's activity) in full (the inspector), read on the ledger thread."""
        timeline = await self._timeline(run_id)
        return await self._db(lambda: timeline.detail(connect(self.settings.ledger), run_id, step))

    def _read(
        self, run_id: str | None, since: float | None, reset: bool, stats: TickStats
    ) -> tuple[Snapshot, list[str], str | None, bool, list[KillEvent], list[FleetEvent]]:
        """Everything a poll reads from the ledger, on the ledger thread. Unless something was
        committed since the last poll (data_version), one statement: the same figures, no rows."""
        conn = CountingLedger(connect(self.settings.ledger), stats)
        version = conn.data_version()
        last = self._last
        if since is not None and last is not None and last[0] == run_id and last[1] == version:
            snap = replace(last[2], steps=[], effects=[], worker_events=[], truncated_steps=[], partial=True)
            return snap, self._planned, None, False, [], []
        # new events, and the last few again: a kill's event gets its measured latency written later
        events_after = None if reset else max(0, self._last_event_id - EVENTS_REREAD)
        snap = build_snapshot(conn, self.settings, run_id, since=since, events_after=events_after)
        if snap.worker_events:
            self._last_event_id = snap.worker_events[-1].id
        self._last = (run_id, version, snap)
        self._planned = [f.describe() for f in faults.pending(conn, [NEXT_RUN, run_id or ""])]
        first = None
        if reset and run_id is not None:
            row = queries.run(conn, run_id)
            first = row.first_execution if row else None
        return snap, self._planned, first, True, *self._marks.new(conn, run_id, reset)

    def _step_in_flight(self, snap: Snapshot, reset: bool) -> bool:
        """Whether a step of the viewed run is running, from the step rows the polls delivered (each
        changed row comes once; a run's first poll brings them all): no query of its own."""
        if reset:
            self._running_steps.clear()
        for s in snap.steps:
            if s.status == "running":
                self._running_steps.add(s.step)
            else:
                self._running_steps.discard(s.step)
        return bool(self._running_steps) and snap.run_status == "running"

    async def _workflow_status(
        self, run_id: str, changed: bool, live: bool, stats: TickStats
    ) -> tuple[str | None, PendingActivity | None]:
        """Temporal's status, asked when the ledger's run status moved, else every STATUS_EVERY_S (a
        terminate from outside writes nothing to the ledger), or every PENDING_EVERY_S while a step is
        in flight, when the same describe brings the pending activity; a closed workflow's status is final."""
        cached = self._final_status.get(run_id)
        if cached:
            return cached, None
        now = time.monotonic()
        asked = self._status_asked
        every = PENDING_EVERY_S if live else STATUS_EVERY_S
        if not changed and asked is not None and now - asked[0] < every:
            return asked[1], asked[2] if live else None
        assert self.client is not None
        stats.temporal += 1
        status, pending, task_attempt = await describe_run(self.client, run_id)
        self._status_asked = (now, status, pending)
        if task_attempt >= STUCK_ATTEMPT and run_id not in self._stuck:  # read once: the run cannot go on
            found = await stuck_task(self.client, run_id)
            if found is not None:
                self._stuck[run_id] = found.line()
        if status not in (None, "RUNNING"):
            self._final_status[run_id] = status
        return status, pending if live else None

    async def new_run(self, steps: int, pace: float) -> str:
        """`n`: the workload the app was opened with, shaped by the dialog (our loop: steps, pace and the
        faults planned for the next run)."""
        assert self.client is not None
        hooks = self.workload.fault_hooks  # else no fault is planned (plan_fault refuses)
        planned = await self._db(lambda: faults.pending(connect(self.settings.ledger), [NEXT_RUN])) if hooks else []
        workload = self.workload.shaped(steps, pace, planned)
        self.run_id = await workload.start(self.settings, self.client, ledger_call=self._db)
        if hooks:
            await self._db(lambda: faults.delete_for_run(connect(self.settings.ledger), NEXT_RUN))
        return self.run_id

    async def plan_fault(self, fault: FaultSpec, for_current_run: bool) -> str:
        if not self.workload.fault_hooks:
            raise Failed(f"{self.workload.title()} has no fault hooks: faults are planned in checkpoint-tui's own loop")
        target = self.run_id if for_current_run and self.run_id else NEXT_RUN
        await self._db(lambda: faults.add_fault(connect(self.settings.ledger), target, fault))
        return target

    async def kill(self) -> KillReport:
        sup = self.supervisor
        if sup is None or sup.primary is None:
            raise Failed("no worker to kill")
        if not sup.owns_home:
            raise Failed("another supervisor owns this home; kill from there")
        return await sup.kill(reason="user pressed k")

    async def cancel(self) -> None:
        if self.client is not None and self.run_id is not None:
            await cancel_run(self.client, self.run_id)

    async def runs(self, limit: int = 200) -> list[RunSummary]:
        return await self._db(lambda: queries.recent_runs(connect(self.settings.ledger), limit))

    async def comparison(self) -> Comparison | None:
        """The latest naive-vs-durable comparison, counted now from the outbox files and the ledger."""
        return await self._db(read_comparison, self.settings)

    async def _proof_tool(self, home: Path, *argv: str, on_line: Callable[[str], None] | None = None) -> int:
        """Run a proving tool as `checkpoint-tui` would: a process of its own (its kills and its
        supervisor are not this app's), the same settings handed on through the environment. With
        `on_line`, each line it prints is handed over as it comes."""
        out = asyncio.subprocess.PIPE if on_line else asyncio.subprocess.DEVNULL
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "checkpoint_tui",
            "--home",
            str(home),
            *self._address_flags(home),
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=asyncio.subprocess.DEVNULL,
            env=self.settings.child_env(),
        )
        if on_line is None or proc.stdout is None:
            return await proc.wait()
        reader = asyncio.create_task(_hand_lines(proc.stdout, on_line))
        code = await proc.wait()
        try:  # a descendant that kept the pipe open must not hold the app past the tool's exit
            await asyncio.wait_for(reader, PIPE_DRAIN_S)
        except TimeoutError:
            reader.cancel()
        return code

    def _address_flags(self, home: Path) -> list[str]:
        if home != self.settings.home:
            return []  # a home of its own starts its own dev server
        return self.settings.server_flags()

    async def run_comparison(self, steps: int = 6, kill_step: int = 3) -> None:
        code = await self._proof_tool(self.settings.home, "compare", "--steps", str(steps), "--kill-at", str(kill_step))
        if code not in (0, 1):  # 1: the durable side repeated an email, which the screen shows
            raise Failed(f"compare exited {code}; see {self.settings.run_dir}")

    async def run_chaos(
        self, seed: int, steps: int = 12, kills: int = 6, on_line: Callable[[str], None] | None = None
    ) -> dict:
        """A chaos schedule in a home of its own (run/chaos): it kills a supervisor and the dev server,
        which must not be this app's. `on_line` gets what chaos prints (its schedule first); returns
        the report chaos wrote to disk."""
        chaos_home = self.settings.run_dir / "chaos"
        code = await self._proof_tool(
            chaos_home, "chaos", "--seed", str(seed), "--steps", str(steps), "--kills", str(kills), on_line=on_line
        )
        await self._proof_tool(chaos_home, "stop")  # the chaos home's processes are not the app's: stop them
        report = chaos_home / "run" / f"chaos-seed{seed}.json"
        if not report.exists():
            raise Failed(f"chaos wrote no report (exit {code}); see {chaos_home / 'run'}")
        return json.loads(report.read_text())

    async def chaos_progress(self, run_id: str) -> int:
        """Completed steps of the chaos run, read from the chaos home's ledger (or the shared one)."""
        chaos = replace(self.settings, home=self.settings.run_dir / "chaos")
        return await self._db(lambda: queries.count_completed(connect(chaos.ledger), run_id))

    def lesson(self, steps: int = 4, pace: float = 0.5) -> Lesson:
        """The step-through lesson on this home (core/lesson.py): its durable run on this session's
        supervisor and dev server, its naive loop a child process, all driven from a thread of its own."""
        assert self.supervisor is not None, "boot() first"
        return Lesson(self.settings, self.address, self.supervisor, steps, pace)

    def view_run(self, run_id: str) -> None:
        self.run_id = run_id  # the next poll sees a new run and delivers it whole

    async def shutdown(self, stop_everything: bool = False) -> None:
        """`q` leaves the worker and the dev server running (the next start adopts them);
        `ctrl+q` stops them too."""
        if self.supervisor is not None:
            await self.supervisor.stop(stop_workers=stop_everything)
        if self._history is not None:
            await self._history.stop()
        await self._fleet.stop()
        self._db_thread.shutdown(wait=False)
        if stop_everything and self.settings.embedded:
            await asyncio.to_thread(stop_devserver, self.settings)


async def _hand_lines(stream: asyncio.StreamReader, on_line: Callable[[str], None]) -> None:
    async for raw in stream:
        on_line(raw.decode("utf-8", "replace").rstrip("\n"))
