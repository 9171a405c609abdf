"""The Textual app: a thin client over a LabSession. One poller builds a View off the UI's critical
path (SQLite in a thread, Temporal async), polls never overlap, and the handler applies it by key
inside a batch update. The app holds no run state: quit and restart and every pane shows the same."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static

from checkpoint_tui.core.view import View
from checkpoint_tui.core.workload import Workload
from checkpoint_tui.errors import CheckpointError, Failed
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.settings import Settings
from checkpoint_tui.tui.bindings import BINDINGS as KEYS
from checkpoint_tui.tui.chaos_screen import ChaosScreen, status_counts
from checkpoint_tui.tui.commands import lab_commands
from checkpoint_tui.tui.lesson_screen import LessonScreen
from checkpoint_tui.tui.panes.history import HistoryPane
from checkpoint_tui.tui.panes.ledger import LedgerPane
from checkpoint_tui.tui.panes.pane_info import boxed
from checkpoint_tui.tui.panes.status import WIDE_COLUMNS, StatusBar
from checkpoint_tui.tui.panes.timeline import TimelinePane
from checkpoint_tui.tui.panes.worker_events import WorkerEventsPane
from checkpoint_tui.tui.screens import ComparisonScreen, FaultScreen, HelpScreen, NewRunScreen, RunsScreen
from checkpoint_tui.tui.session import Session
from checkpoint_tui.tui.step_screen import StepScreen
from checkpoint_tui.tui.tick_report import StatsFile, TickReport

POLL_INTERVAL_S = 0.5
IDLE_POLL_S = 1.0  # the refresh while the viewed run is over and nothing changes (see _pause)


@dataclass(frozen=True)
class _Panes:
    status: StatusBar
    banner: Static
    timeline: TimelinePane
    ledger: LedgerPane
    history: HistoryPane
    workers: WorkerEventsPane


class ViewReady(Message):
    def __init__(self, view: View, poll_s: float) -> None:
        super().__init__()
        self.view = view
        self.poll_s = poll_s  # how long building the View took


class CheckpointApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "checkpoint-tui"
    # Below WIDE_COLUMNS the screen gets `-narrow` (app.tcss): one pane per row, `h` for the others.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (WIDE_COLUMNS, "-wide")]
    BINDINGS = KEYS  # tui/bindings.py: the footer keeps ? and q at 80 columns

    def __init__(
        self,
        session: Session,
        poll_interval: float = POLL_INTERVAL_S,
        tick_observer: Callable[[TickReport], None] | None = None,
    ) -> None:
        super().__init__()
        self.session = session
        self.poll_interval = poll_interval
        self.tick_observer = tick_observer  # one TickReport per refresh (bench/tui_tick.py, --stats)
        self._stop_everything = False
        self._panes: _Panes | None = None
        self._booted = asyncio.Event()
        self._poll_now = asyncio.Event()  # ends the pause between polls (an action changed what is shown)
        self._chaos: ChaosScreen | None = None  # the latest chaos run's screen
        self._lesson = None  # the step-through lesson (core/lesson.py), made on the first `v`
        self.viewed_run: str | None = None  # the run of the last View applied (the inspector opens its steps)

    def compose(self) -> ComposeResult:
        yield StatusBar()
        yield Static("", id="banner")
        with Horizontal(id="main"):
            with Vertical(id="left"):
                yield boxed(TimelinePane(), "timeline-box")
                yield boxed(WorkerEventsPane(), "workers-box")
            with Vertical(id="right"):
                yield boxed(LedgerPane(), "ledger-box")
                yield boxed(HistoryPane(), "history-box")
        yield Footer()

    def on_mount(self) -> None:
        # Found once: a query walks the DOM, and the refresh handler runs twice a second.
        self._panes = _Panes(
            self.query_one(StatusBar),
            self.query_one("#banner", Static),
            self.query_one(TimelinePane),
            self.query_one(LedgerPane),
            self.query_one(HistoryPane),
            self.query_one(WorkerEventsPane),
        )
        self.query_one(TimelinePane).focus()
        self.boot_and_poll()

    @work(exclusive=False, group="poller", exit_on_error=False)
    async def boot_and_poll(self) -> None:
        status = self.query_one(StatusBar)
        try:
            await self.session.boot()
        except (CheckpointError, OSError) as err:  # an OSError: the home went bad after its checks
            status.set_pill("temporal-down")
            status.say(str(err) if isinstance(err, CheckpointError) else f"cannot start: {err}")
            return
        self._booted.set()
        # What exists now (Textual, the SDK, the session) lives as long as the app: out of the garbage
        # collector's full passes, which otherwise walk it every ~10 s of a live run (~0.1 s each).
        gc.freeze()
        gc.set_threshold(10_000, 10, 10)  # young collections every 10k allocations, not 700 (7/s live)
        status.say("ready — n new run · k kill worker · f faults · ? help")
        while True:  # the next poll starts only when the last one has been applied: no overlap
            view = None
            try:
                started = time.perf_counter()
                view = await self.session.poll()
                self.post_message(ViewReady(view, time.perf_counter() - started))
            except Exception as err:  # report, keep polling (Temporal may come back)
                settings = getattr(self.session, "settings", None)
                if settings is not None and not settings.embedded:
                    hint = f"the external server {settings.temporal_address} is not ours to restart: check it"
                else:
                    hint = "the supervisor restarts the embedded dev server"
                status.say(f"Temporal unreachable ({type(err).__name__}); {hint}. Still polling.")
                status.set_pill("temporal-down")
            await self._pause(view)

    async def _pause(self, view: View | None) -> None:
        """The refresh interval; twice that (at least IDLE_POLL_S) while the viewed run is over and
        nothing changed since the last poll: every wake-up of an idle app costs CPU. An action that
        changes what is shown (a new run, another run, a kill) ends the pause at once."""
        idle = view is not None and view.quiet and view.snapshot.final_state is not None
        pause = max(IDLE_POLL_S, 2 * self.poll_interval) if idle else self.poll_interval
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._poll_now.wait(), pause)
        self._poll_now.clear()

    @on(ViewReady)
    def apply_view(self, message: ViewReady) -> None:
        started = time.perf_counter()
        view = message.view
        panes = self._panes
        if panes is None or not panes.status.is_attached:  # a View that arrives while the app shuts down
            return
        with self.batch_update():
            if view.run_changed:
                for pane in (panes.timeline, panes.ledger, panes.history):
                    pane.reset()
                    pane.info.expire()
            panes.status.show(view)
            panes.timeline.apply(view.snapshot, view.pending, view.counts)
            panes.ledger.apply(view.snapshot)
            panes.history.apply(view.history, view.kills, view.marks)
            panes.workers.apply(view.snapshot.worker_events, view.fleet, view.backlog)
            for table in (panes.timeline, panes.ledger, panes.history, panes.workers):
                table.settle_bars()  # in this frame: any other time would paint a frame of its own
            self._banner(view)
        self.viewed_run = view.snapshot.run_id
        if self.tick_observer is not None:
            self.tick_observer(TickReport.of(message.poll_s, time.perf_counter() - started, view.stats))

    def _banner(self, view: View) -> None:
        assert self._panes is not None
        banner = self._panes.banner
        bad = view.snapshot.guardrail_step
        if bad is None:
            banner.set_class(False, "shown")
            return
        text = Text(f"guardrail failure at step {bad.step}: {bad.error or ''}\nraw model output: ", style="bold")
        text.append(bad.raw_output or "", style="not bold")  # plain text: never parsed as markup
        banner.update(text)
        banner.set_class(True, "shown")

    # --- actions -----------------------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_kill_marker(self, direction: int) -> None:
        """`m` / `M`: the history pane scrolled to the next / previous kill marker (brought on screen
        first in the narrow layout)."""
        if self._panes is None:
            return
        found = self._panes.history.scroll_to_marker(direction)
        if found is None:
            self._panes.status.say("no kill markers in the history shown")
            return
        self._show_events(True)
        self._panes.status.say(found)

    def action_swap_panes(self) -> None:
        """`h`: in the narrow layout, history and worker events in place of timeline and ledger (and
        back); in the wide one every pane is already on screen."""
        if not self.screen.has_class("-narrow"):
            self.query_one(StatusBar).say("every pane is on screen (h swaps them below 110 columns)")
            return
        self._show_events(not self.query_one("#main").has_class("-events"))

    def _show_events(self, events: bool) -> None:
        main = self.query_one("#main")
        main.set_class(events, "-events")
        if self.screen.has_class("-narrow"):
            (self.query_one(HistoryPane) if events else self.query_one(TimelinePane)).focus()

    @on(TimelinePane.Inspect)
    def inspect_step(self, message: TimelinePane.Inspect) -> None:
        self._inspect(message.step)

    @on(HistoryPane.Inspect)
    def inspect_marker_step(self, message: HistoryPane.Inspect) -> None:
        """Enter in the history pane (where `m` leaves the focus below 110 columns): the step the kill
        marker on screen interrupted, else the timeline's row."""
        if message.step is None:
            self.action_inspect_step()
        else:
            self._inspect(message.step)

    def _inspect(self, step: int) -> None:
        if self.viewed_run is not None and self._panes is not None:
            history = self._panes.history
            self.push_screen(
                StepScreen(self.session, self.viewed_run, step, history.events_between, history.markers_for_step)
            )

    def action_inspect_step(self) -> None:
        """The command palette's way in: the timeline's cursor row (the last step if none)."""
        if self._panes is None:
            return
        timeline = self._panes.timeline
        if timeline.cursor_row < 0 and timeline.row_count:
            timeline.action_cursor_to(-1)
        timeline.action_inspect()

    def action_new_run(self) -> None:
        if not self.session.workload.asks_shape:  # a user's workflow: its type and input were given
            self._start_run(0, 0.0)
        else:
            self.push_screen(NewRunScreen(), self._new_run_chosen)

    def _new_run_chosen(self, result: tuple[int, float] | None) -> None:
        if result:
            self._start_run(*result)

    @work(group="actions", exit_on_error=False)
    async def _start_run(self, steps: int, pace: float) -> None:
        await self._booted.wait()
        status = self.query_one(StatusBar)
        try:
            run_id = await self.session.new_run(steps, pace)
        except Exception as err:
            status.say(f"could not start a run: {err}")
            return
        status.say(f"started {run_id} ({self.session.workload.shaped(steps, pace).title()})")
        self._poll_now.set()

    @work(group="actions", exit_on_error=False)
    async def action_kill_worker(self) -> None:
        status = self.query_one(StatusBar)
        if not self._booted.is_set():
            status.say("not ready yet")
            return
        status.set_pill("worker-dead")
        try:
            report = await self.session.kill()
        except Exception as err:
            status.say(f"kill refused: {err}")
            return
        self._poll_now.set()
        code = "none" if report.exit_code is None else report.exit_code
        where = f" at step {report.step}" if report.step else ""
        status.say(
            f"worker {report.pid} killed{where} · {'observed ' if report.observed else ''}signal {report.signal}"
            f" · exit code {code} · confirmed gone={report.confirmed}"
        )

    @work(group="actions", exit_on_error=False)
    async def action_cancel_run(self) -> None:
        try:
            await self.session.cancel()
            self._poll_now.set()
            self.query_one(StatusBar).say("cancel requested")
        except Exception as err:
            self.query_one(StatusBar).say(f"cancel failed: {err}")

    def action_faults(self) -> None:
        if not self.session.workload.fault_hooks:  # a user's workflow: no worker of ours deals them
            title = self.session.workload.title()
            self.query_one(StatusBar).say(f"{title} has no fault hooks: `chaos --workflow` kills its worker")
            return

        def planned(result: tuple[FaultSpec, bool] | None) -> None:
            if result is not None:
                self._plan_fault(*result)

        self.push_screen(FaultScreen(), planned)

    @work(group="actions", exit_on_error=False)
    async def _plan_fault(self, fault: FaultSpec, current: bool) -> None:
        try:
            target = await self.session.plan_fault(fault, current)
        except Failed as err:
            self.query_one(StatusBar).say(str(err))
            return
        self._poll_now.set()
        self.query_one(StatusBar).say(f"planned {fault.describe()} for {target}")

    def action_compare(self) -> None:
        self.push_screen(ComparisonScreen(self.session))

    def action_lesson(self) -> None:
        """The step-through lesson: the same lesson (its runs and processes) each time it is opened."""
        if not self._booted.is_set():
            self.query_one(StatusBar).say("not ready yet")
            return
        if self._lesson is None:
            self._lesson = self.session.lesson()
        self.push_screen(LessonScreen(self._lesson, automatic=self.action_compare))

    async def _close_lesson(self) -> None:
        if self._lesson is not None:  # its naive process stopped, an unfinished durable run cancelled
            await self._lesson.close()

    def action_chaos(self) -> None:
        """Show the running chaos schedule, or start one (seeded by the clock) and show it."""
        if self._chaos is not None and self._chaos.report is None and self._chaos.error is None:
            if not self._chaos.is_attached:
                self.push_screen(self._chaos)
            return
        self._run_chaos(int(time.time()) % 100_000)

    @work(group="chaos", exit_on_error=False)
    async def _run_chaos(self, seed: int, steps: int = 12, kills: int = 6) -> None:
        status = self.query_one(StatusBar)
        screen = self._chaos = ChaosScreen(seed, steps, kills, self.session.chaos_progress)
        self.push_screen(screen)
        status.say(f"chaos seed {seed}: {steps} steps, {kills} kills (worker, claim window, supervisor, dev server)…")
        try:
            report = await self.session.run_chaos(seed, steps, kills, on_line=screen.add_line)
        except Exception as err:
            screen.finished(None, str(err))
            status.say(f"chaos failed to run: {err}")
            return
        screen.finished(report)
        status.say(status_counts(seed, report))

    @work(group="actions", exit_on_error=False)
    async def action_runs(self) -> None:
        def chosen(run_id: str | None) -> None:
            if run_id:
                self.session.view_run(run_id)
                self._poll_now.set()
                self.query_one(StatusBar).say(f"viewing {run_id}")

        self.push_screen(RunsScreen(await self.session.runs()), chosen)

    async def action_quit_keep(self) -> None:
        await self._close_lesson()
        await self.session.shutdown(stop_everything=False)
        self.exit(0)

    async def action_quit_stop(self) -> None:
        self.query_one(StatusBar).say("stopping the worker and the dev server…")
        await self._close_lesson()
        await self.session.shutdown(stop_everything=True)
        self.exit(0)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield from lab_commands(self)


def run_app(
    settings: Settings, workload: Workload, refresh: float = POLL_INTERVAL_S, stats_path: Path | None = None
) -> int:
    from checkpoint_tui.core.session import LabSession
    from checkpoint_tui.tui.backlog import read_backlog

    observer = StatsFile(stats_path) if stats_path else None
    session = LabSession(settings, workload, backlog=read_backlog)
    app = CheckpointApp(session, poll_interval=refresh, tick_observer=observer)
    result = app.run()
    return int(result or 0)
