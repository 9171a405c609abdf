"""A user's workflow while chaos runs it: its activities as Temporal has them, read from history (a
user's run has no step rows), classified by its framework's adapter (frameworks/); which of them
an event aims at (`--aim tool|model|any|GLOB`), and the wait for an aimed activity to be in flight."""

from __future__ import annotations

import asyncio
import fnmatch
import statistics
import time

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from checkpoint_tui.core.activity_history import (
    ActivityExec,
    Chain,
    activities,
    label,
    read_chain,
    read_children,
    with_pending,
)
from checkpoint_tui.core.stuck import CHECK_EVERY_S, StuckTask, stuck_task
from checkpoint_tui.errors import Failed, UsageError
from checkpoint_tui.frameworks import Classifier

AIMS = ("tool", "model", "any")  # or a glob over activity types and tool names
POLL_S = 0.03  # how often history is read while an event waits for its activity start
PROGRESS_TIMEOUT_S = 120.0  # a run's next unit of work (or chaos's next event) must come within this


def check_aim(text: str) -> str:
    if not text or len(text) > 128 or any(ord(c) < 32 for c in text):
        raise UsageError("--aim takes tool, model, any, or a glob over activity types / tool names (<= 128)")
    return text


def aimed(aim: str, act: ActivityExec) -> bool:
    if aim == "any":
        return True
    if aim == "tool":
        return act.cls in ("tool", "mcp", "other")  # an activity of a plain workflow may have effects
    if aim == "model":
        return act.cls == "model"
    name = act.info.name if act.info is not None and act.info.name else ""
    return fnmatch.fnmatchcase(act.activity_type, aim) or bool(name) and fnmatch.fnmatchcase(name, aim)


class Progress:
    """The run as Temporal has it: activities in scheduling order (open ones with their pending
    state), classified."""

    def __init__(self, client: Client, run_id: str, framework: Classifier = None) -> None:
        self.client, self.run_id, self.framework = client, run_id, framework
        self.chain = Chain(run_id)
        self._done: dict = {}  # child workflows seen closed (read once)
        self.acts: list[ActivityExec] = []
        self.closed = False
        self.chain_reads = 0  # refreshes that read the chain
        self.as_read_hits = 0  # refreshes that found its history as read (one describe)

    async def refresh(self) -> None:
        try:
            if await self._as_read():
                return
            self.chain_reads += 1
            chain = await read_chain(self.client, self.run_id)
            await read_children(self.client, chain, done=self._done)  # its children's work is the run's
            self.chain = chain
            self.acts = await with_pending(self.client, self.chain, activities(self.chain))
            label(self.acts, self.framework)
            last = self.chain.executions[-1][1] if self.chain.executions else []
            self.closed = bool(last) and _closes(last[-1])
        except RPCError:  # the dev server restarting (a nemesis): look again
            pass

    async def _as_read(self) -> bool:
        """Whether the latest execution's history is the one last read (as long, still running, no
        children): then only its pending activities are new, from one describe, instead of the whole
        chain read and decoded again (a poll every POLL_S: history only grows, so its length says)."""
        chain = self.chain  # another task's refresh may replace it while the describe is out
        if self.closed or chain.children or not chain.executions:
            return False
        run, _ = chain.executions[-1]
        read = next((events for execution, events in chain.as_read if execution == run), None)
        if read is None:
            return False
        try:
            desc = await self.client.get_workflow_handle(chain.workflow_id, run_id=run).describe()
        except RPCError:  # the whole read says what it can (a closed run's history, say)
            return False
        info = desc.raw_description.workflow_execution_info
        if (
            self.chain is not chain
            or desc.status != WorkflowExecutionStatus.RUNNING
            or info.history_length != len(read)
        ):
            return False
        acts = await with_pending(self.client, chain, activities(chain), desc)
        label(acts, self.framework)
        self.acts = acts
        self.as_read_hits += 1
        return True

    def activity(self, k: int) -> ActivityExec | None:
        return self.acts[k - 1] if len(self.acts) >= k else None

    def aimed(self, aim: str, k: int) -> ActivityExec | None:
        """The k-th activity (in scheduling order) the aim picks, once it is scheduled."""
        picked = [a for a in self.acts if aimed(aim, a)]
        return picked[k - 1] if len(picked) >= k else None

    def usual_s(self, act: ActivityExec) -> float | None:
        """The median duration of the run's completed activities of this one's type (same tool)."""
        kind = _kind(act)
        same = [
            a.duration_s
            for a in self.acts
            if a is not act
            and a.status == "completed"
            and a.activity_type == act.activity_type
            and _kind(a) == kind
            and a.duration_s is not None
        ]
        return statistics.median(same) if same else None


def _kind(act: ActivityExec) -> tuple[str, str | None]:
    """What makes two activities alike for timing: the type, and the tool a framework's call names."""
    return act.activity_type, act.info.name if act.info is not None else None


def closed_at(chain: Chain) -> float | None:
    """When the chain's last execution closed (its closing event's time), None while it is open."""
    last = chain.executions[-1][1] if chain.executions else []
    if not last or not _closes(last[-1]):
        return None
    return last[-1].event_time.seconds + last[-1].event_time.nanos / 1e9


def _closes(ev) -> bool:
    return any(
        ev.HasField(f"workflow_execution_{what}_event_attributes")
        for what in ("completed", "failed", "timed_out", "canceled", "terminated")
    )


async def until_activity(
    progress: Progress, pick, running_on, timeout: float = PROGRESS_TIMEOUT_S
) -> ActivityExec | None:
    """Wait until the activity `pick()` names is in flight on the worker `running_on()` names (not on a
    dead one whose attempt Temporal has not failed yet), or closed (with `running_on` None: only
    closed). None if the workflow closed before it came."""
    deadline = time.monotonic() + timeout
    asked = time.monotonic()
    while True:
        await progress.refresh()
        act = pick()
        if act is not None and act.closed_at is not None:  # between activities; or too late to land inside
            return act
        on_live = running_on is not None and act is not None and act.status == "running"
        if on_live and act.identity is not None and act.identity == running_on():
            return act
        if progress.closed:
            return None
        if time.monotonic() > deadline:
            raise Failed("the run stopped making progress (see run/worker.log, run/temporal.log)")
        if time.monotonic() - asked >= CHECK_EVERY_S:  # a workflow task failing forever: said now, not in 2 min
            asked = time.monotonic()
            if (stuck := await _stuck(progress)) is not None:
                raise Failed(f"{progress.run_id}: {stuck.line()}")
        await asyncio.sleep(POLL_S)


async def _stuck(progress: Progress) -> StuckTask | None:
    try:
        return await stuck_task(progress.client, progress.run_id)
    except RPCError:  # the dev server restarting (a nemesis): ask again later
        return None
