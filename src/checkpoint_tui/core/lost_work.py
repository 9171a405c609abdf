"""Lost work in a run of a user's workflow, from its history: what Temporal's pre-production testing guide
asks to watch under chaos (timeouts sat out, failed workflows, workflow task failures, schedule-to-start),
each timeout named by the lab event behind it. Pure but for `read_lost_work`, which reads the lab's
events from the ledger (core/activity_audit.py reads it). The lab's SIGKILL
costs a wait, not work; a timeout no lab event explains, or one after a graceful stop (the SDK finishes a
task or hands it back), is the application's loss, as are a final timeout, a failed or timed-out
workflow and a workflow task failing for good."""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace

from temporalio.api.enums.v1 import TimeoutType

from checkpoint_tui.core.chain import Chain
from checkpoint_tui.core.workflow_end import (
    Latency,
    Outcome,
    TaskFailure,
    event_time,
    latency,
    one_line,
    outcome,
    versions,
    workflow_task_failures,
)
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.fleet_queries import worker_versions

FLEET_DOWN = "chaos:fleet-down"
SLACK_S = 0.5  # a lab event this much outside a lost attempt's estimated window still counts (clocks, rounding)
TIMER_LATE_S = 1.5  # timers fire late: a retry came 0.92 s after timeout + backoff (measured); windows start early
# Temporal's default retry policy (1 s after the first failure, x2 each time, at most 100 x the first), for a
# scheduled event that holds no retry policy of its own.
DEFAULT_BACKOFF_S, DEFAULT_MAX_FACTOR = 1.0, 100.0
DETAIL_LIMIT = 200  # entries kept per list in the JSON (as the audit's own lists)
LAB_KINDS = ("kill", "died", "sigterm", "exit")  # plus every `chaos:<nemesis>`
# Events that reach every run of the lab, whichever run chaos filed them under: the dev server's death
# (no attempt's heartbeat or completion is recorded until it is back), a partition between the workers
# and Temporal, a fleet-down (its queue, checked by _swept, says which attempts it reached).
LAB_WIDE = ("chaos:temporal-server", "chaos:partition", FLEET_DOWN)
CUT_OFF = LAB_WIDE[:2]  # every worker cut off from Temporal: whatever attempt was running (_swept)
STOPS = {
    "graceful-restart": "a graceful restart",
    "churn": "a churn restart",
    "deploy": "a deploy",
    "fleet-down": "a fleet shutdown",
}
_STOP_WORDS = {"sigterm": "a SIGTERM", "exit": "an exit", "kill": "the lab's SIGKILL", "died": "the death"}
# The scheduled event's timeout of each kind: all history says of how long a retried attempt waited.
_CONFIGURED = {
    "START_TO_CLOSE": ("start_to_close_timeout", "schedule_to_close_timeout"),
    "HEARTBEAT": ("heartbeat_timeout",),
    "SCHEDULE_TO_START": ("schedule_to_start_timeout",),
    "SCHEDULE_TO_CLOSE": ("schedule_to_close_timeout",),
}


@dataclass(frozen=True)
class LabEvent:
    """A worker event of the ledger (table worker_events) that can stop an attempt."""

    at: float
    event: str  # kill | died | sigterm | exit | chaos:<nemesis>
    pid: int | None = None
    host: str | None = None
    identity: str | None = None
    detail: Mapping = field(default_factory=dict)  # its JSON detail, e.g. {"nemesis": "deploy", "graceful": true}

    @property
    def who(self) -> str | None:
        """The worker's Temporal identity: as recorded, else the SDK's default `pid@host`."""
        if named := self.identity or self.detail.get("identity"):
            return one_line(str(named), 120)
        return f"{self.pid}@{self.host}" if self.pid is not None and self.host else None

    @property
    def graceful(self) -> bool:
        """A stop the SDK is given time to finish or hand back its tasks in (SIGTERM), not a SIGKILL."""
        return self.detail.get("graceful") is True or self.event == "sigterm" or self.detail.get("signal") == "SIGTERM"

    def cause(self) -> dict:
        nemesis = self.detail.get("nemesis")
        return {
            "event": one_line(self.event, 60),
            "pid": self.pid,
            "at": self.at,
            "identity": self.who,
            "graceful": self.graceful,
            "nemesis": one_line(nemesis, 40) if isinstance(nemesis, str) else None,
        }


@dataclass(frozen=True)
class TimedOut:
    """One activity attempt that waited out a timeout."""

    seq: int  # the activity, 1, 2, ... in scheduling order across the chain (as ActivityExec.seq)
    activity_type: str
    activity_id: str
    attempt: int  # the attempt that timed out
    kind: str  # START_TO_CLOSE | HEARTBEAT | SCHEDULE_TO_START | SCHEDULE_TO_CLOSE
    waited_s: float | None  # final: timed out - started (or scheduled); retried: the configured timeout
    delayed_s: float | None  # retried: its closing attempt's start - its scheduling; final: None (never done)
    final: bool  # no retry left: Temporal closed the activity as timed out
    identity: str | None  # the worker that held the attempt, when history says (a final timeout's started event)
    lost_from: float  # the lost attempt's estimated window (see timeouts())
    lost_at: float
    cause: dict | None = None  # the lab event that caused it (LabEvent.cause()), None: the application's own
    # The earliest the lost attempt can have started: its scheduling when it was the activity's first
    # attempt (history cannot say when a later one started), else lost_from. A crash point on the activity
    # between the two is its cause even when a cold replacement made the retry start late.
    earliest: float | None = None
    queue: str | None = None  # the task queue it was scheduled on: a fleet-down of that queue killed whoever held it

    @property
    def lost(self) -> bool:
        """Lost work: no retry left, or no lab kill behind it (none, or a graceful stop)."""
        return self.final or self.cause is None or bool(self.cause.get("graceful"))

    def line(self) -> str:
        waited = f"{self.waited_s:.1f} s" if self.waited_s is not None else "? s"
        what = f"{self.activity_type} #{self.seq}"
        head = (
            f"{what} timed out for good: its {self.kind} timeout ({waited}, attempt {self.attempt}, no retries)"
            if self.final
            else f"{what} waited out its {self.kind} timeout ({waited}, attempt {self.attempt})"
        )
        head += f" {_by(self.cause)}" if self.cause is not None else " with no lab event (the application's own)"
        if not self.lost and self.delayed_s is not None:
            head += f"; recovered after waiting {self.delayed_s:.1f} s"
        return head


def _by(cause: dict) -> str:
    event, nemesis = cause.get("event") or "", cause.get("nemesis")
    if nemesis in STOPS:
        what = STOPS[nemesis]
    elif event.startswith("chaos:"):
        what = f"the lab's {event.removeprefix('chaos:')}"
    else:
        what = _STOP_WORDS.get(event, event)
    who = cause.get("identity") or (f"pid {cause['pid']}" if cause.get("pid") is not None else None)
    if who is None:
        swept = event == FLEET_DOWN or nemesis == "fleet-down"
        return f"after {what} ({'every worker of its queue SIGKILLed' if swept else 'its worker unrecorded'})"
    return f"after {what} of worker {who}"


def entry(unit: TimedOut | TaskFailure | Outcome) -> dict:
    """One unit as JSON, with whether it is lost and its line."""
    return {**asdict(unit), "lost": unit.lost, "line": unit.line()}


def timeouts(chain: Chain) -> list[TimedOut]:
    """Every activity attempt of the chain that waited out a timeout. A retried one has no event: the closing
    attempt's started event (written at close) carries it as `last_failure` (so only the attempt before the
    closing one is known); a final one is an ACTIVITY_TASK_TIMED_OUT event. The lost attempt's window: a final
    one's from its start (else scheduling) to its timeout; a retried one's ends a retry backoff before its
    closing attempt started, its configured timeout long (an estimate: too late by any queue wait)."""
    found: list[TimedOut] = []
    seq = 0
    for _, events in chain.executions:
        scheduled: dict[int, tuple[int, object]] = {}
        started: dict[int, object] = {}
        for ev in events:
            if ev.HasField("activity_task_scheduled_event_attributes"):
                seq += 1
                scheduled[ev.event_id] = (seq, ev)
            elif ev.HasField("activity_task_started_event_attributes"):
                started[ev.event_id] = ev
                if (retried := _retried(ev, scheduled)) is not None:
                    found.append(retried)
            elif ev.HasField("activity_task_timed_out_event_attributes") and (final := _final(ev, scheduled, started)):
                found.append(final)
    return found


def _timeout_kind(failure) -> str | None:
    """The timeout a failure is (its own info: a timeout inside an application error is the application's)."""
    if not failure.HasField("timeout_failure_info"):
        return None
    kind = failure.timeout_failure_info.timeout_type  # one this SDK does not know (a newer server): its number
    return TimeoutType.Name(kind).removeprefix("TIMEOUT_TYPE_") if kind in TimeoutType.values() else f"timeout {kind}"


def _secs(duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def _backoff(sched, failed_attempt: int) -> float:
    """Temporal's wait before the attempt after `failed_attempt`: initial x coefficient^(n-1), capped."""
    policy = sched.retry_policy
    initial, coefficient = _secs(policy.initial_interval) or DEFAULT_BACKOFF_S, policy.backoff_coefficient or 2.0
    cap = _secs(policy.maximum_interval) or initial * DEFAULT_MAX_FACTOR
    return min(cap, initial * coefficient ** min(failed_attempt - 1, 64))


def _retried(ev, scheduled: dict) -> TimedOut | None:
    a = ev.activity_task_started_event_attributes
    if a.attempt <= 1 or not a.HasField("last_failure") or (kind := _timeout_kind(a.last_failure)) is None:
        return None
    if (found := scheduled.get(a.scheduled_event_id)) is None:
        return None
    seq, sched_ev = found
    s = sched_ev.activity_task_scheduled_event_attributes
    waited = next((v for name in _CONFIGURED.get(kind, ()) if (v := _secs(getattr(s, name)))), None)
    start, sched_at = event_time(ev), event_time(sched_ev)
    lost_at = max(sched_at, start - _backoff(s, a.attempt - 1))
    lost_from = max(sched_at, lost_at - (waited or 0.0))
    return TimedOut(
        seq,
        one_line(s.activity_type.name, 128),
        one_line(s.activity_id, 64),
        a.attempt - 1,
        kind,
        waited,
        max(0.0, start - sched_at),
        False,
        None,
        lost_from,
        lost_at,
        earliest=sched_at if a.attempt == 2 else lost_from,
        queue=one_line(s.task_queue.name, 200) or None,
    )


def _final(ev, scheduled: dict, started: dict) -> TimedOut | None:
    a = ev.activity_task_timed_out_event_attributes
    if (found := scheduled.get(a.scheduled_event_id)) is None:
        return None
    seq, sched_ev = found
    s = sched_ev.activity_task_scheduled_event_attributes
    st = started.get(a.started_event_id)
    sa = st.activity_task_started_event_attributes if st is not None else None
    begin, end, kind = event_time(st if st is not None else sched_ev), event_time(ev), _timeout_kind(a.failure)
    return TimedOut(
        seq,
        one_line(s.activity_type.name, 128),
        one_line(s.activity_id, 64),
        max(1, sa.attempt) if sa else 1,
        kind or "UNSPECIFIED",
        max(0.0, end - begin),
        None,
        True,
        (one_line(sa.identity, 120) or None) if sa else None,
        begin,
        end,
    )


def attribute(timeouts: Iterable[TimedOut], lab: Iterable[LabEvent], run: str | None = None) -> list[TimedOut]:
    """Each timeout with its cause: the latest lab event (kill, died, sigterm, exit, chaos:*) within its
    lost attempt's window (SLACK_S either side), one of the timeout's own worker first when it knows that
    worker, then a kill aimed at that activity of no other workflow than `run`; None: the application's own."""
    events = sorted((e for e in lab if e.event in LAB_KINDS or e.event.startswith("chaos:")), key=lambda e: e.at)
    times = [e.at for e in events]
    out = []
    for t in timeouts:
        lo, hi = (
            bisect.bisect_left(times, t.lost_from - SLACK_S - (0.0 if t.final else TIMER_LATE_S)),
            bisect.bisect_right(times, t.lost_at + SLACK_S),
        )
        window = events[lo:hi]
        own = [e for e in window if t.identity is not None and e.who == t.identity]
        # a crash point or an aimed kill names the activity it killed, and its workflow (each of many runs has an
        # activity "3"): the cause from the attempt's earliest start (a cold replacement makes the retry late)
        first = bisect.bisect_left(times, min(t.lost_from, t.earliest or t.lost_from) - SLACK_S)
        named = [e for e in events[first:hi] if t.activity_id and str(e.detail.get("activity_id", "")) == t.activity_id]
        aimed = [e for e in named if (e.detail.get("workflow_id") or e.detail.get("aimed_workflow")) in (None, run)]
        aimed += _swept(t, events[first:hi])
        aimed.sort(key=lambda e: e.at)
        window = sorted({id(e): e for e in [*window, *aimed]}.values(), key=lambda e: e.at)
        pick = (own or aimed or window)[-1] if window else None
        cause = pick.cause() if pick is not None else None
        if pick is not None and cause and not cause["nemesis"]:  # an exit after a rollout's SIGTERM: the rollout's
            named = [e for e in window if pick.who is not None and e.who == pick.who and e.detail.get("nemesis")]
            cause["nemesis"] = named[-1].cause()["nemesis"] if named else None
        out.append(replace(t, cause=cause))
    return out


def _swept(t: TimedOut, events: list[LabEvent]) -> list[LabEvent]:
    """Lab-wide events while the attempt can only have been running: a fleet-down of its queue SIGKILLed
    every worker that could hold it; the dev server's death, or a partition, cut every worker off (no
    heartbeat or completion recorded; the server fires the timeout late, once back: after the estimated
    window). From its earliest start to the moment its own timeout would have fired had it started
    then: one after that (it timed out on its own, and the event met the retry) explains nothing."""
    if t.earliest is None or t.waited_s is None:
        return []
    latest = t.earliest + t.waited_s + SLACK_S
    reached = [
        e for e in events if e.event in CUT_OFF or e.event == FLEET_DOWN and e.detail.get("queue") in ("all", t.queue)
    ]
    return [e for e in reached if t.earliest - SLACK_S <= e.at <= latest]


@dataclass
class LostWork:
    """What a run lost, and what it only waited out, from its history and the lab's worker events."""

    timeouts: list[TimedOut] = field(default_factory=list)
    task_failures: list[TaskFailure] = field(default_factory=list)
    outcome: Outcome | None = None
    schedule_to_start: dict[str, Latency | None] = field(default_factory=dict)  # latency()
    versions: dict[str, int] = field(default_factory=dict)  # workflow tasks per Worker Deployment Version

    def units(self, end: bool = True) -> list[str]:
        """One line per unit of work lost: timeouts, workflow tasks failing for good, the workflow's end."""
        units: list[TimedOut | TaskFailure] = [*self.timeouts, *self.task_failures]
        found = [u.line() for u in units if u.lost]
        return found + ([self.outcome.line()] if end and self.outcome is not None and self.outcome.lost else [])

    @property
    def lost(self) -> int:
        return len(self.units())

    def first(self) -> str | None:
        """The first lost unit but the workflow's end (the verdict says the end itself)."""
        return next(iter(self.units(end=False)), None)

    def to_dict(self) -> dict:
        units = self.units()
        return {
            "lost": len(units),
            "first": self.first(),
            "units": units[:DETAIL_LIMIT],
            "timeouts": [entry(t) for t in self.timeouts[:DETAIL_LIMIT]],
            "timeouts_total": len(self.timeouts),
            "task_failures": [entry(f) for f in self.task_failures[:DETAIL_LIMIT]],
            "task_failures_total": len(self.task_failures),
            "outcome": entry(self.outcome) if self.outcome is not None else None,
            "schedule_to_start": {k: v and asdict(v) for k, v in self.schedule_to_start.items()},
            "versions": self.versions,
        }


def lost_work(chain: Chain, worker_events: Iterable[LabEvent] = (), now: float | None = None) -> LostWork:
    lost, failed = attribute(timeouts(chain), worker_events, chain.workflow_id), workflow_task_failures(chain, now)
    return LostWork(lost, failed, outcome(chain), latency(chain), versions(chain))


# History's events that name the worker that ran a task (a worker this run used)
_IDENTIFIED = (
    "activity_task_started_event_attributes",
    "workflow_task_started_event_attributes",
    "workflow_task_completed_event_attributes",
)


def read_lost_work(conn: Ledger, run_id: str, chain: Chain, now: float | None = None) -> LostWork:
    """The run's lost work: its history against the lab's worker events over the history's span (a
    workflow task still failing is measured to `now`). An event counts if it is filed under this run or
    under none, or stopped a worker this run's history names, or reached every run on this run's queue
    (LAB_WIDE): the run an event is filed under is a guess (the latest running one, or chaos's lead run),
    and a kill filed under another run still stops this one's attempt on that worker; a worker this run
    never used, or a server another lab killed (on a shared ledger), explains nothing."""
    events = chain.events
    now = time.time() if now is None else now
    if not events:
        return lost_work(chain, (), now)
    served = {getattr(ev, name).identity for ev in events for name in _IDENTIFIED if ev.HasField(name)}
    rows = queries.lab_events(conn, event_time(events[0]) - SLACK_S, event_time(events[-1]) + SLACK_S)
    lab = [LabEvent(r["at"], r["event"], r["pid"], r["host"], r["identity"], r["detail"]) for r in rows]
    queue = _workflow_queue(events)
    mine = [
        e
        for e, r in zip(lab, rows, strict=True)
        if r["run_id"] in (None, run_id) or e.who in served or _reached(e, queue)
    ]
    found = lost_work(chain, mine, now)
    names = {f.identity for f in found.task_failures if f.identity}
    if names and found.versions:  # a versioned run: each failure by the version its worker ran then
        at = {f: worker_versions(conn, [f.identity or ""], f.first_at + SLACK_S) for f in found.task_failures}
        ran = {f: one_line(by.get(f.identity or "", ""), 100) or None for f, by in at.items()}
        found.task_failures = [replace(f, version=ran[f]) for f in found.task_failures]
    return found


def _workflow_queue(events: list) -> str | None:
    """The task queue the run's first execution was started on."""
    first = events[0]
    if not first.HasField("workflow_execution_started_event_attributes"):
        return None
    return first.workflow_execution_started_event_attributes.task_queue.name or None


def _reached(event: LabEvent, queue: str | None) -> bool:
    """A lab-wide event (the dev server's death, a partition, a fleet-down) of the lab whose queues
    include the run's: chaos names them in the event (one filed without them reaches no other run)."""
    queues = event.detail.get("queues")
    return event.event in LAB_WIDE and queue is not None and isinstance(queues, list) and queue in queues
