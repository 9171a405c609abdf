"""Which window of the run a worker's death landed in, decided after the fact from durable data: the
run's Temporal history up to the death (what was in flight), and the ledger's claim attempts (where
inside the exactly-once protocol the dead worker was). Chaos reports, the kill marker and the step
inspector all name a kill's window through `classify`, so they never disagree.

The windows, in the order a step passes through them (docs/chaos.md, "Where each kill landed"):

- `model call` / `tool call`: the model or tool activity was in flight.
- `effect before its claim`: the effect activity was in flight and the dead worker held no open claim
  (it had not claimed yet, or was between two effects).
- `claim → write`: it held a claim it had not stamped, and the attempt that finished the effect had to
  do the write itself.
- `write → stamp`: the same, but the finishing attempt found the write already done: the one place a
  duplicate is born if the protocol is wrong.
- `claim → stamp`: an open claim where the write cannot tell whether it was done (a user's effect).
- `stamped, activity not completed`: every effect of the step stamped, the activity not yet reported.
- `bookkeeping`: the loop's own step-row activities.
- `workflow task` / `timer` / `between tasks`: no activity in flight; a workflow task, or a timer,
  was open (or neither).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from checkpoint_tui.core.kill_marker import in_flight, in_flight_event, open_task
from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.effects.probe import ProbeRecord
from checkpoint_tui.ledger.effects import KINDS
from checkpoint_tui.ledger.inspect_queries import KillEvent
from checkpoint_tui.ledger.rows import ClaimAttempt

MODEL, TOOL = "model call", "tool call"
BEFORE_CLAIM, CLAIM_WRITE, WRITE_STAMP, CLAIM_STAMP = (
    "effect before its claim",
    "claim → write",
    "write → stamp",
    "claim → stamp",
)
STAMPED = "stamped, activity not completed"
BOOKKEEPING, WORKFLOW_TASK, TIMER, BETWEEN = "bookkeeping", "workflow task", "timer", "between tasks"
EFFECT = "effect activity"  # where in it is not known without the claim attempts (the live history pane)

# Every window of the lab's own loop, in a step's order (a user's activity adds `activity <name>`).
WINDOWS = (
    MODEL,
    TOOL,
    BEFORE_CLAIM,
    CLAIM_WRITE,
    WRITE_STAMP,
    CLAIM_STAMP,
    STAMPED,
    BOOKKEEPING,
    WORKFLOW_TASK,
    TIMER,
    BETWEEN,
)
# The windows `chaos --until-covered` aims at, each reachable on the lab's loop (by time or a fault
# hook); `claim → stamp` is the undivided window of a write that cannot tell, and bookkeeping and a
# bare workflow task last milliseconds: counted when hit, not aimed at.
COVERAGE = (MODEL, TOOL, BEFORE_CLAIM, CLAIM_WRITE, WRITE_STAMP, STAMPED, TIMER)

_ACTIVITY_ID = re.compile(r"\bactivity_id=(\S+)")
_ACTIVITIES = {"llm": MODEL, "tool": TOOL, "mark_step_running": BOOKKEEPING, "mark_step_completed": BOOKKEEPING}


def _mine(kill: KillEvent, a: ClaimAttempt) -> bool:
    return a.worker_pid == kill.pid and (a.host or "") == (kill.host or "") and a.started_at <= kill.at


def classify(
    kill: KillEvent,
    before: Sequence[HistoryEvent],
    attempts: Sequence[ClaimAttempt] | None,
    probe: Sequence[ProbeRecord] | None = None,
) -> str:
    """The window of one death. `before`: the run's history events up to the death; `attempts`: the
    claim attempts of the run (or of the step in flight), oldest first; None if not read, and then a
    death inside the effect activity is only `effect activity`. `probe`: a user's workload's probe log
    (the effects library's writes as entered), which also places a death inside a user's activity that
    claims through the library (`_user_window`)."""
    open_claim = next(
        (a for a in reversed(attempts or ()) if _mine(kill, a) and (a.finished_at is None or a.finished_at > kill.at)),
        None,
    )
    if open_claim is not None:  # inside the protocol: what the attempt that finished it found
        finisher = next(
            (
                a
                for a in attempts or ()
                if a.effect_id == open_claim.effect_id
                and a.seq > open_claim.seq
                and a.outcome in ("recovered", "skipped")
            ),
            None,
        )
        if (finisher is None or finisher.found_written is None) and probe is not None:  # a user's write
            return WRITE_STAMP if _entered(kill, open_claim, probe) else CLAIM_WRITE
        if finisher is None or finisher.found_written is None:
            return CLAIM_STAMP
        return WRITE_STAMP if finisher.found_written else CLAIM_WRITE
    activity = in_flight(before)
    if activity is None:
        task = open_task(before)
        return TIMER if task == "TIMER_STARTED" else WORKFLOW_TASK if task else BETWEEN
    if activity == "effect" and attempts is None:
        return EFFECT
    if activity == "effect":
        step = kill.activity_step if kill.activity_step is not None else kill.step
        done = {a.effect_id for a in attempts or () if _mine(kill, a) and a.step == step and a.finished_at is not None}
        return STAMPED if len(done) >= len(KINDS) else BEFORE_CLAIM
    if probe is not None and activity not in _ACTIVITIES and (found := _user_window(kill, before, attempts)):
        return found
    return _ACTIVITIES.get(activity, f"activity {activity}")


def _entered(kill: KillEvent, claim: ClaimAttempt, probe: Sequence[ProbeRecord]) -> bool:
    """The dead worker had entered its write of the claimed effect: the library appends (and fsyncs) a
    probe record of the key, the pid and the attempt after the claim, right before calling the write;
    a dead process appends nothing, so a record of its pid and attempt was there before its death."""
    return any(r.key == claim.effect_id and r.pid == kill.pid and r.attempt == claim.attempt for r in probe)


def _user_window(
    kill: KillEvent, before: Sequence[HistoryEvent], attempts: Sequence[ClaimAttempt] | None
) -> str | None:
    """A death inside a user's activity that claims through the library (claims of the run with `step` =
    its activity id, since it was scheduled), holding no open claim: `stamped, activity not completed`
    if the dead worker had stamped every effect the activity ever claimed, else `effect before its
    claim`. None: the activity makes no claim (its class's window)."""
    scheduled = in_flight_event(before)
    found = _ACTIVITY_ID.search(scheduled.attrs) if scheduled is not None else None
    if scheduled is None or found is None or not found[1].isdigit():
        return None
    claims = [a for a in attempts or () if a.step == int(found[1]) and a.started_at >= scheduled.time]
    if not claims:
        return None
    done = {a.effect_id for a in claims if _mine(kill, a) and a.finished_at is not None and a.finished_at <= kill.at}
    return STAMPED if done and done >= {a.effect_id for a in claims} else BEFORE_CLAIM


def before(events: Sequence[HistoryEvent], at: float) -> list[HistoryEvent]:
    """The events recorded at or before `at` (history is in time order)."""
    return [e for e in events if e.time <= at]


def windows_of(
    kills: Sequence[KillEvent],
    events: Sequence[HistoryEvent],
    attempts: Sequence[ClaimAttempt],
    probe: Sequence[ProbeRecord] | None = None,
) -> list[tuple[KillEvent, str]]:
    """Each death with its window, oldest first."""
    return [(k, classify(k, before(events, k.at), attempts, probe)) for k in sorted(kills, key=lambda k: k.at)]


def counts(windows: Sequence[str]) -> dict[str, int]:
    """{window: kills}, in a step's order, then any user activity's window."""
    out = {w: windows.count(w) for w in WINDOWS if w in windows}
    out.update({w: windows.count(w) for w in windows if w not in out})
    return out
