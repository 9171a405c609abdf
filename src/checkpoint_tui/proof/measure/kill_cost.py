"""`doctor --measure`: in a run doctor starts, one SIGKILL of the worker under each activity type of the
diagnosis, with no assistance (the supervisor neither fails the dead worker's attempt nor resets its
sticky queue: what a production worker dying would see), and how long until Temporal started that
activity's next attempt (or closed it), read from history and the pending activity's state.

The aiming is chaos's (proof/chaos/workflow_target.py: `Progress`, `until_activity`): an activity of a type
not yet measured, running on the live worker as Temporal says. The kill is the supervisor's
(identity-checked SIGKILL, a replacement spawned). A kill waits at most `cap_s` (`--kill-cap`) for the
next attempt; past it the figure is "≥ cap". Once a kill's figure is in (or its cap), what the dead
worker still holds is failed by id and its sticky queue reset (ops/failover.py, as assisted failover
would), so the run goes on to the next type without waiting out timeouts nobody measures."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from temporalio.client import Client

from checkpoint_tui.core.activity_history import ActivityExec
from checkpoint_tui.core.diagnosis import ActivityType, Diagnosis, Measurement, fmt_s
from checkpoint_tui.errors import Failed
from checkpoint_tui.ops.failover import assist
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.proof.nemeses.aim import Progress, until_activity
from checkpoint_tui.settings import Settings

POLL_S = 0.2  # history is read this often while a kill waits (the figure is Temporal's time, not the poll's)
PROGRESS_EVERY_S = 5.0  # a line while a kill waits this long
MIN_CAP_S = 1.0  # a kill the --timeout let wait less than this is not measured ("≥ 0.2 s" says nothing)


@dataclass
class Budget:
    """What is left of the command's --timeout."""

    deadline: float  # time.monotonic()
    total_s: float  # --timeout

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


@dataclass
class Aim:
    """Which activity types are still to be measured, and how often each one's activities closed
    before a kill could land inside them (too brief)."""

    types: dict[str, ActivityType]
    done: dict[str, Measurement] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)
    seen_upto: int = 0  # activities (in scheduling order) already aimed at or passed over

    def next_in(self, acts: list[ActivityExec]) -> ActivityExec | None:
        return next(
            (a for a in acts[self.seen_upto :] if a.activity_type in self.types and a.activity_type not in self.done),
            None,
        )

    def miss(self, act: ActivityExec) -> None:
        self.missed[act.activity_type] = self.missed.get(act.activity_type, 0) + 1


class Measurer:
    def __init__(
        self,
        settings: Settings,
        client: Client,
        sup: Supervisor,
        diagnosis: Diagnosis,
        cap_s: float,
        budget: Budget,
        framework: str | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        self.settings, self.client, self.sup, self.cap_s, self.budget = settings, client, sup, cap_s, budget
        self.aim = Aim({t.name: t for t in diagnosis.types})
        self.framework, self.say = framework, say

    def _live(self) -> str | None:
        worker = self.sup.primary
        return worker.name if worker is not None else None

    async def run(self, run_id: str) -> dict[str, Measurement]:
        """Aim at each type in turn as the run makes them; every type gets a Measurement (some "not measured")."""
        progress, aim = Progress(self.client, run_id, self.framework), self.aim
        self.say(
            f"doctor: measuring {len(aim.types)} activity type(s) in {run_id}: one unassisted kill each, "
            f"at most {self.cap_s:g} s per kill"
        )
        ended = "the run ended before one ran on a live worker"
        while len(aim.done) < len(aim.types):
            try:
                act = await self._next_aimed(progress)
            except Failed:
                ended = "the --timeout ran out before one ran on the live worker"
                break
            if act is None:
                break
            aim.seen_upto = act.seq
            if act.closed_at is not None:  # closed before a look saw it running
                aim.miss(act)
                continue
            measured = await self.kill_under(progress, act)
            if measured is None:
                aim.miss(act)
            else:
                aim.done[act.activity_type] = measured
        for name in aim.types:
            if name not in aim.done:
                aim.done[name] = Measurement(name, why=self._why_not(name, ended))
        return aim.done

    async def _next_aimed(self, progress: Progress) -> ActivityExec | None:
        """chaos's until_activity, in slices with a line after each (a run may wait on a timeout of its
        own, e.g. a sticky queue); Failed once the --timeout is spent."""
        aim, waited = self.aim, 0.0
        while True:
            slice_s = max(min(PROGRESS_EVERY_S, self.budget.left()), 0.01)
            try:
                return await until_activity(progress, lambda: aim.next_in(progress.acts), self._live, slice_s)
            except Failed:
                if self.budget.left() <= 0:
                    raise
            waited += slice_s
            left = [name for name in aim.types if name not in aim.done]
            self.say(
                f"doctor: {waited:.0f} s waiting for one of {', '.join(left[:3])}"
                f"{' ...' if len(left) > 3 else ''} to run on the live worker"
            )

    def _why_not(self, name: str, ended: str) -> str:
        missed, t = self.aim.missed.get(name, 0), self.aim.types[name]
        if not missed:
            return ended
        usual = f"; it usually runs {t.median_s:.2f} s" if t.median_s is not None else ""
        return f"each of its {missed} run(s) closed before a kill could land inside it{usual}"

    async def kill_under(self, progress: Progress, act: ActivityExec) -> Measurement | None:
        """SIGKILL the worker running `act`, then wait for its next attempt; None if the kill missed it
        (the attempt completed first)."""
        worker = self.sup.primary
        if worker is None or worker.name != act.identity:
            return None
        t = self.aim.types[act.activity_type]
        aimed = {"activity_id": act.activity_id, "aimed_workflow": progress.run_id}  # the cause of its timeout
        report = await self.sup.kill(f"doctor --measure: {act.activity_type}", worker, aimed)
        at, attempt = report.at, act.attempt
        into = None if act.started_at is None else round(at - act.started_at, 3)
        self.say(
            f"doctor: SIGKILL pid {report.pid} under {act.label} (activity {act.activity_id}, attempt {attempt}"
            f"{f', {into:.2f} s in' if into is not None else ''}); waiting for attempt {attempt + 1} "
            f"(predicted {fmt_s(t.predicted_restart_s)}, cap {self.cap_s:g} s)"
        )
        m = Measurement(
            act.activity_type, activity=f"{act.label} #{act.activity_id}", attempt=attempt, pid=report.pid, into_s=into
        )
        cap = min(self.cap_s, self.budget.left())
        found = await self._next_attempt(progress, act.seq, attempt, at, cap, act.activity_type)
        # The figure is in (or the cap): what the dead worker still holds (its attempt at the cap, a
        # parallel activity's, its sticky queue) is failed by id and reset, so the run goes on.
        await assist(self.settings, self.client, [worker])
        if found == "missed":
            self.say(f"doctor: attempt {attempt} of {act.label} completed before the kill; aiming at the next one")
            return None
        if found == "unseen":
            m.why = f"attempt {attempt + 1} closed between two reads of history; its start is not recorded"
            return m
        if found is None:
            if cap >= MIN_CAP_S:  # else the --timeout left no time to wait: no figure at all
                m.outcome, m.measured_s = "capped", round(cap, 3)
            m.why = "the --timeout ran out" if cap < self.cap_s else None
            self.say(
                f"doctor: {act.activity_type}: no attempt {attempt + 1} within {cap:.1f} s; the dead worker's "
                f"attempt was failed so the run goes on"
            )
            return m
        assert not isinstance(found, str)  # the words were handled above: a figure is (outcome, closed at)
        m.outcome, closed_at = found
        m.measured_s = round(closed_at - at, 3)
        self.say(f"doctor: {act.activity_type}: {m.figure()} after the kill")
        return m

    async def _next_attempt(
        self, progress: Progress, seq: int, attempt: int, at: float, cap: float, name: str
    ) -> tuple[str, float] | str | None:
        """What Temporal did with the activity after the kill (next_attempt), or None at the cap."""
        deadline = last_said = time.monotonic()
        deadline += cap
        while True:
            await progress.refresh()
            act = progress.activity(seq)
            found = next_attempt(act, attempt, at) if act is not None else None
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                return None
            if time.monotonic() - last_said >= PROGRESS_EVERY_S:
                last_said = time.monotonic()
                self.say(
                    f"doctor: {name}: {time.time() - at:.0f} s since the kill; Temporal has not timed out "
                    f"attempt {attempt} yet"
                )
            await asyncio.sleep(POLL_S)  # the pace of the reads: the figure is Temporal's time, not this loop's


def next_attempt(act: ActivityExec, attempt: int, at: float) -> tuple[str, float] | str | None:
    """What history (and the pending activity) says of `act` after its attempt `attempt` lost its worker
    at `at`: ("retried", when attempt n+1 started), ("failed", when it closed without one), "missed" (the
    attempt completed: the kill came too late), "unseen" (a later attempt closed it: n+1's start is not
    in history), or None (Temporal has not timed the attempt out yet)."""
    if act.attempt == attempt + 1 and act.started_at is not None and act.started_at > at:
        return "retried", act.started_at
    if act.attempt > attempt + 1:
        return "unseen"
    if act.closed_at is not None and act.attempt == attempt:
        return "missed" if act.status == "completed" else ("failed", act.closed_at)
    return None
