"""The app's screen of one run as an SVG, rendered headless for a proof bundle: the real CheckpointApp
over a session that only hands it one prepared View (no Temporal, supervisor or process is started).
With `markers`, one more SVG per kill marker line the history pane placed, scrolled to that line."""

from __future__ import annotations

from pathlib import Path

from checkpoint_tui.core.view import View
from checkpoint_tui.core.workload import Workload
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.panes.history import HistoryPane
from checkpoint_tui.tui.panes.status import StatusBar
from checkpoint_tui.tui.panes.worker_events import WorkerEventsPane
from checkpoint_tui.workloads import AgentLoopWorkload

SIZE = (160, 44)
MAX_MARKER_SVGS = 10  # a soak's dozens of kills: the first ten each get a picture
IDLE_POLL_S = 3600.0  # the one View never changes: no repaint between the first poll and the capture
APPLY_WAIT_S = 10.0


class StillSession:
    """A read-only session: every poll returns the same View (its history only the first time)."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.polls = 0
        self.workload: Workload = AgentLoopWorkload()  # screenshots are of proof bundles, which are our own loop's

    async def boot(self) -> None:
        return None

    async def poll(self) -> View:
        self.polls += 1
        if self.polls == 1:
            return self.view
        return View(**{**self.view.__dict__, "history": [], "kills": [], "run_changed": False})

    async def new_run(self, steps: int, pace: float) -> str:
        raise RuntimeError("a recorded screen: nothing to start")

    async def kill(self):
        raise RuntimeError("a recorded screen: nothing to kill")

    async def cancel(self) -> None:
        return None

    async def plan_fault(self, fault, for_current_run: bool) -> str:
        raise RuntimeError("a recorded screen: nothing to plan")

    async def runs(self) -> list:
        return []

    def view_run(self, run_id: str) -> None:
        return None

    async def comparison(self):
        return None

    async def run_comparison(self, steps: int = 6, kill_step: int = 3) -> None:
        return None

    async def run_chaos(self, seed: int, steps: int = 12, kills: int = 6, on_line=None) -> dict:
        raise RuntimeError("a recorded screen: no chaos")

    async def chaos_progress(self, run_id: str) -> int:
        return 0

    async def step_detail(self, run_id: str, step: int):
        return None  # a recorded screen opens no inspector

    def lesson(self):
        raise RuntimeError("a recorded screen: no lesson")

    async def shutdown(self, stop_everything: bool = False) -> None:
        return None


async def save_svg(
    view: View, message: str, path: Path, size: tuple[int, int] = SIZE, markers: Path | None = None
) -> list[Path]:
    """Render `view` with `message` in the status bar and write the screen as SVG to `path`; with
    `markers` (a folder), also `kill-N.svg` there for each kill marker line in the history pane, the
    pane scrolled to put that line in its middle. Returns the files written."""
    session = StillSession(view)
    app = CheckpointApp(session, poll_interval=IDLE_POLL_S)
    title = f"checkpoint-tui · {view.snapshot.run_id}"
    written: list[tuple[Path, str]] = []
    async with app.run_test(headless=True, size=size) as pilot:
        status = app.query_one(StatusBar)
        waited = 0.0
        while status.pill == "starting" and waited < APPLY_WAIT_S:  # the first View sets the pill
            await pilot.pause(0.05)
            waited += 0.05
        status.say(message)
        history = app.query_one(HistoryPane)
        for log in (history, app.query_one(WorkerEventsPane)):  # as a live app ends: the newest lines in view
            log.scroll_end(animate=False, immediate=True)
        await pilot.pause()
        written.append((path, app.export_screenshot(title=title)))
        rows = [i for i, name in enumerate(history.names) if name == "KILL"][:MAX_MARKER_SVGS]
        for n, row in enumerate(rows if markers is not None else [], start=1):
            assert markers is not None
            history.scroll_to(y=max(0, row - history.size.height // 2), animate=False, immediate=True)
            await pilot.pause()
            written.append((markers / f"kill-{n}.svg", app.export_screenshot(title=f"{title} · kill {n}")))
    for target, svg in written:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(svg)
    return [target for target, _ in written]
