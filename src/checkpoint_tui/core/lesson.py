"""The step-through lesson (seed 003's page, by hand): the same task twice, side by side, each moved
with Next step, Kill, and Restart and finish.

- **naive**: the naive loop as a child process (`loop_worker/naive.py --step-by-step`), one step per
  Next. Its progress lives in its memory: Kill is a real SIGKILL (identity-checked), and Restart and
  finish starts a new process that knows nothing of the old one and sends every email again.
- **durable**: a run of this home's AgentLoop started behind a gate (`AgentInput.allowed_steps`);
  Next signals it one step further and waits until the ledger shows that step completed. Kill is the
  home supervisor's SIGKILL of the active worker (its warm spare takes over, as after any death);
  Restart and finish opens the gate to the last step, and the run resumes from Temporal's history.

What the screen shows is read back each time: emails from each run's outbox file, the durable run's
steps and duplicates from the ledger. All of it runs on the lesson's own thread (its own event loop
and Temporal client): the caller's loop only awaits."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from checkpoint_tui.core.lesson_sides import DurableSide, NaiveSide, SideView
from checkpoint_tui.ops.loop_thread import LoopThread
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.settings import Settings

SIDES = ("naive", "durable")
ACTIONS = ("next_step", "kill", "finish")
CLOSE_WAIT_S = 10.0


@dataclass(frozen=True)
class LessonView:
    steps: int
    naive: SideView
    durable: SideView


class Lesson:
    def __init__(self, settings: Settings, address: str, supervisor: Supervisor, steps: int = 4, pace: float = 0.5):
        self.settings, self.address, self.supervisor = settings, address, supervisor
        self.steps, self.pace = steps, pace
        self._thread = LoopThread(name="lesson")
        self._stopped = asyncio.Event()
        self._busy: set[str] = set()
        self._closed = False
        self._main_task: asyncio.Task | None = None
        self._sides = self._new_sides()

    def _new_sides(self) -> dict[str, NaiveSide | DurableSide]:
        return {
            "naive": NaiveSide(self.settings, self.steps, self.pace),
            "durable": DurableSide(self.settings, self.address, self.supervisor, self.steps, self.pace),
        }

    async def _run(self, coro):
        if self._closed:
            coro.close()
            raise RuntimeError("the lesson is closed")
        if not self._thread.alive:
            self._thread.start(self._main)
        return await self._thread.run(coro)

    async def _main(self) -> None:
        """The thread's loop lives until close()."""
        self._main_task = asyncio.current_task()
        await self._stopped.wait()

    async def act(self, side: str, action: str) -> str:
        """Next step / Kill / Restart and finish on one side; what happened, in a sentence. One Next step
        or Restart and finish at a time per side (another is refused, not queued); Kill lands whenever
        it is pressed, in the middle of a step too."""
        if side not in SIDES or action not in ACTIONS:
            raise ValueError(f"no {action!r} on side {side!r}")
        return await self._run(self._act(side, action))

    async def _act(self, side: str, action: str) -> str:
        if action == "kill":
            return await self._sides[side].kill()
        if side in self._busy:
            return f"{side}: busy with the last action"
        self._busy.add(side)
        try:
            return await getattr(self._sides[side], action)()
        finally:
            self._busy.discard(side)

    async def view(self) -> LessonView:
        return await self._run(self._view())

    async def _view(self) -> LessonView:
        naive, durable = self._sides["naive"], self._sides["durable"]
        return LessonView(self.steps, naive.view("naive" in self._busy), durable.view("durable" in self._busy))

    async def start_over(self) -> str:
        """Fresh runs on both sides (the naive process stopped, an unfinished durable run cancelled)."""
        return await self._run(self._start_over())

    async def _start_over(self) -> str:
        if self._busy:
            return f"{' and '.join(sorted(self._busy))}: busy with the last action; start over when it is done"
        for side in self._sides.values():
            await side.close()
        self._sides = self._new_sides()
        return "started over: fresh runs on both sides"

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self._thread.alive:
            return
        await self._thread.run(self._close())
        await self._thread.join(CLOSE_WAIT_S)

    async def _close(self) -> None:
        try:
            for side in self._sides.values():
                await side.close()
        finally:
            for task in asyncio.all_tasks():  # an action still waiting (a run's end): its caller is gone
                if task not in (asyncio.current_task(), self._main_task):
                    task.cancel()
            self._stopped.set()
