"""`doctor`: what a kill would cost each activity type of a workflow, read from the timeouts and retry
policies its history recorded, and what to change where the answer is "too long" or "the workflow fails".

A worker that dies under an activity is not noticed by Temporal until the attempt times out: the
heartbeat timeout if one is set, else the start-to-close (the SDK does not detect a process exit;
sdk-python#1012). So the unassisted kill → retry of a type is that timeout plus the retry's first
interval. Pure functions over a history chain (core/activity_history.py): nothing here talks to a server.
`doctor --measure` adds one measured kill per type (a `Measurement`, made by proof/measure/kill_cost.py), set
beside the prediction with the finding it confirms."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from checkpoint_tui.core.activity_history import Chain, activities, decode_payload, label, plain
from checkpoint_tui.frameworks import Classifier, detect, get
from checkpoint_tui.frameworks.base import ADVICE

KILL_COST_LIMIT_S = 10.0  # an unassisted kill that costs this or more is a finding, however short the activity
DEFAULT_RETRY_INITIAL_S = 1.0  # Temporal's default first retry interval
STICKY_DEFAULT_S = 10.0  # the SDKs' default sticky schedule-to-start timeout (not recorded in history)
LOCAL_MARKERS = ("core_local_activity", "LocalActivity")  # the Core SDKs' marker name, Java/Go's
MAX_TYPES = 200  # activity types reported (a hostile history may name thousands)


@dataclass
class ActivityType:
    """One activity type as history scheduled it (the first scheduling's options; `varied` if they differ)."""

    name: str
    cls: str  # model | tool | mcp | other (core/frameworks)
    count: int = 0
    heartbeat_timeout_s: float | None = None
    start_to_close_s: float | None = None
    schedule_to_close_s: float | None = None
    maximum_attempts: int = 0  # 0: unlimited
    initial_interval_s: float | None = None
    varied: bool = False
    durations: list[float] = field(default_factory=list, repr=False)

    @property
    def kill_cost_s(self) -> float | None:
        """How long an attempt whose worker died waits before Temporal times it out."""
        return self.heartbeat_timeout_s or self.start_to_close_s or self.schedule_to_close_s

    @property
    def predicted_restart_s(self) -> float | None:
        cost = self.kill_cost_s
        return None if cost is None else cost + (self.initial_interval_s or DEFAULT_RETRY_INITIAL_S)

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.durations) if self.durations else None

    def to_dict(self) -> dict:
        return {
            "activity_type": self.name,
            "class": self.cls,
            "count": self.count,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
            "start_to_close_s": self.start_to_close_s,
            "schedule_to_close_s": self.schedule_to_close_s,
            "maximum_attempts": self.maximum_attempts,
            "initial_interval_s": self.initial_interval_s,
            "options_varied": self.varied,
            "median_duration_s": self.median_s,
            "predicted_unassisted_restart_s": self.predicted_restart_s,
        }


@dataclass(frozen=True)
class Finding:
    kind: str  # kill-costs-timeout | single-attempt | local-activity | run-not-completed
    subject: str  # the activity type (or "workflow")
    problem: str
    fix: str

    def line(self) -> str:
        return f"{self.subject}: {self.problem}\n    fix: {self.fix}"


@dataclass
class Measurement:
    """One SIGKILL of the worker under an activity of this type with no assistance, and when Temporal
    started the activity's next attempt or closed it, as history has it (proof/measure/kill_cost.py)."""

    activity_type: str
    outcome: str = "not-measured"  # retried | failed | capped | not-measured
    measured_s: float | None = None  # kill → attempt n+1 started (retried), the activity closed (failed); the cap
    why: str | None = None  # why not measured; or what bounded a cap shorter than --kill-cap
    activity: str | None = None  # the activity the kill landed in
    attempt: int | None = None  # the attempt the kill ended
    pid: int | None = None  # the worker killed
    into_s: float | None = None  # how far into that attempt (from Temporal's start) the kill landed

    def figure(self) -> str:
        if self.measured_s is None:
            return f"not measured ({self.why or 'no kill landed'})"
        if self.outcome == "capped":
            return f"≥ {self.measured_s:.1f} s (cap{': ' + self.why if self.why else ''})"
        if self.outcome == "failed":
            return f"{self.measured_s:.2f} s, then the activity failed (attempt {self.attempt} not retried)"
        return f"{self.measured_s:.2f} s (attempt {(self.attempt or 1) + 1} started)"

    def to_dict(self) -> dict:
        return {
            "outcome": self.outcome,
            "measured_s": self.measured_s,
            "why": self.why,
            "activity": self.activity,
            "killed_attempt": self.attempt,
            "pid": self.pid,
            "into_s": self.into_s,
            "text": self.figure(),
        }


def confirms(m: Measurement, t: ActivityType, kinds: set[str]) -> str:
    """What the measured kill says about the type's findings (or their absence); "" when not measured."""
    if m.measured_s is None:
        return ""
    if m.outcome == "failed":
        return "confirms single-attempt" if "single-attempt" in kinds else "the kill failed the activity"
    slow, over = "kill-costs-timeout" in kinds, m.measured_s >= KILL_COST_LIMIT_S
    predicted = t.predicted_restart_s
    if slow and over:
        return "confirms kill-costs-timeout"
    if m.outcome == "capped":
        if predicted is not None and m.measured_s < predicted:
            longer = "--timeout" if m.why and "--timeout" in m.why else "--kill-cap"
            return f"the cap is under the predicted {fmt_s(predicted)}: a longer {longer} would measure it"
        return "slower than predicted" + (" (kill-measured-slow)" if over else "")
    if slow:
        return f"does not confirm kill-costs-timeout (under {KILL_COST_LIMIT_S:.0f} s)"
    return (
        "slower than predicted (kill-measured-slow)"
        if over
        else f"confirms no kill-costs-timeout (under {KILL_COST_LIMIT_S:.0f} s)"
    )


@dataclass
class Diagnosis:
    workflow_id: str
    framework: str | None
    types: list[ActivityType]
    local_activities: dict[str, int]  # type (or "local activity") → markers
    workflow_task_timeout_s: float | None
    sticky: bool  # workflow tasks went to a worker's sticky queue
    findings: list[Finding]
    measured: dict[str, Measurement] | None = None  # --measure: per activity type
    measure_run: str | None = None  # the run the kills landed in
    cap_s: float | None = None  # --kill-cap

    def to_dict(self) -> dict:
        types = [t.to_dict() for t in self.types]
        if self.measured is not None:
            for t, d in zip(self.types, types, strict=True):
                m = self.measured.get(t.name)
                d["measured"] = None if m is None else {**m.to_dict(), "confirms": confirms(m, t, self.kinds(t.name))}
        return {
            "workflow_id": self.workflow_id,
            "framework": self.framework,
            "activity_types": types,
            "local_activities": self.local_activities,
            "workflow_task_timeout_s": self.workflow_task_timeout_s,
            "sticky_queue": self.sticky,
            "findings": [f.__dict__ for f in self.findings],
            "ok": not self.findings,
            "measure": None if self.measured is None else {"run_id": self.measure_run, "cap_s": self.cap_s},
        }

    def kinds(self, subject: str) -> set[str]:
        return {f.kind for f in self.findings if f.subject == subject}

    def with_measured(self, measured: dict[str, Measurement], run_id: str, cap_s: float) -> None:
        """Set the measurements beside the predictions; a type measured at the limit or over it that
        was not predicted to be is a finding of its own (kill-measured-slow)."""
        self.measured, self.measure_run, self.cap_s = measured, run_id, cap_s
        for t in self.types:
            m = measured.get(t.name)
            if m is None or m.measured_s is None or m.outcome == "failed" or "kill-costs-timeout" in self.kinds(t.name):
                continue
            if m.measured_s >= KILL_COST_LIMIT_S:
                self.findings.append(
                    Finding(
                        "kill-measured-slow",
                        t.name,
                        f"one unassisted kill under it cost {m.figure()}, against a predicted "
                        f"{fmt_s(t.predicted_restart_s)}",
                        "see run/worker.log: a retry waits for a worker to poll, so keep a second one polling "
                        "(--workers 2 here, two replicas in production) rather than one that restarts cold",
                    )
                )

    def measured_lines(self) -> list[str]:
        if self.measured is None:
            return []
        out = [
            f"measured in {self.measure_run}: one SIGKILL of the worker per activity type, unassisted until "
            f"its next attempt (no attempt failed by id, no sticky reset); kill → that attempt, from history "
            f"(cap {self.cap_s:g} s)"
        ]
        for t in self.types:
            m = self.measured.get(t.name) or Measurement(t.name, why="not aimed at")
            verdict = confirms(m, t, self.kinds(t.name))
            figure = m.figure() if m.measured_s is None else f"measured {m.figure()}"
            out.append(
                f"  {t.name[:34]:<34} predicted {fmt_s(t.predicted_restart_s, 1):>7}  {figure}"
                + (f"  · {verdict}" if verdict else "")
            )
        return out

    def lines(self) -> list[str]:
        out = [f"doctor {self.workflow_id}" + (f" ({self.framework})" if self.framework else "")]
        out.append(
            f"  {'activity type':<34} {'class':<6} {'n':>4} {'heartbeat':>9} {'start-to-close':>14} "
            f"{'attempts':>8} {'median':>8}  unassisted kill → retry"
        )
        for t in self.types:
            out.append(
                f"  {t.name[:34]:<34} {t.cls:<6} {t.count:>4} {fmt_s(t.heartbeat_timeout_s):>9} "
                f"{fmt_s(t.start_to_close_s or t.schedule_to_close_s):>14} {t.maximum_attempts or '∞':>8} "
                f"{fmt_s(t.median_s, 2):>8}  {fmt_s(t.predicted_restart_s)}" + (" (options varied)" if t.varied else "")
            )
        for name, n in self.local_activities.items():
            out.append(f"  {name[:34]:<34} local  {n:>4}  (a kill costs the workflow task timeout)")
        wtt = fmt_s(self.workflow_task_timeout_s or None)
        sticky = ""
        if self.sticky:
            sticky = (
                f"; sticky queues in use: a kill between workflow tasks can cost the worker's sticky "
                f"schedule-to-start (SDK default {STICKY_DEFAULT_S:.0f} s; not in history)"
            )
        out.append(f"  workflow task timeout {wtt}{sticky}")
        out += self.measured_lines()
        if self.findings:
            out.append(f"{len(self.findings)} finding(s):")
            out += [f"  {f.line()}" for f in self.findings]
        else:
            out.append(f"no findings: every activity type retries in under {KILL_COST_LIMIT_S:.0f} s after a kill")
        return out


def fmt_s(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "—"
    return f"{value:.{digits}f} s" if value < 120 else f"{value / 60:.1f} min"


def _secs(duration) -> float | None:
    value = duration.seconds + duration.nanos / 1e9
    return value or None


def diagnose(chain: Chain, classifier: Classifier = None, language: str = "python") -> Diagnosis:
    """The run's activity types with their options and findings; `classifier` a forced framework or a
    declaration (--model/--tool-activities, [tool.checkpoint-tui]), else the types name their framework."""
    acts = activities(chain)  # classified by the framework their types name
    if classifier is not None:
        label(acts, classifier)  # what the user said instead
    framework = classifier if isinstance(classifier, str) else detect(a.seen() for a in acts)
    types: dict[str, ActivityType] = {}
    by_event: dict[tuple[str, str], ActivityType] = {}
    locals_: dict[str, int] = {}
    wtt: float | None = None
    sticky = False
    classes = {a.activity_type: a.cls for a in acts}
    for execution, events in chain.executions:
        for ev in events:
            if ev.HasField("workflow_execution_started_event_attributes") and wtt is None:
                wtt = _secs(ev.workflow_execution_started_event_attributes.workflow_task_timeout)
            elif ev.HasField("workflow_task_scheduled_event_attributes"):
                sticky = sticky or ev.workflow_task_scheduled_event_attributes.task_queue.kind == 2  # STICKY
            elif ev.HasField("marker_recorded_event_attributes"):
                m = ev.marker_recorded_event_attributes
                if m.marker_name in LOCAL_MARKERS and len(locals_) < MAX_TYPES:
                    name = _local_type(m)
                    locals_[name] = locals_.get(name, 0) + 1
            elif ev.HasField("activity_task_scheduled_event_attributes"):
                a = ev.activity_task_scheduled_event_attributes
                name = plain(a.activity_type.name, 128)
                seen = _options(a)
                t = types.get(name)
                if t is None:
                    if len(types) >= MAX_TYPES:
                        continue
                    t = types[name] = ActivityType(name, classes.get(name, "other"), **seen)
                elif seen != _options_of(t):
                    t.varied = True
                t.count += 1
                by_event[(execution, plain(a.activity_id, 64))] = t
    for a in acts:
        t = by_event.get((a.execution, a.activity_id))
        if t is not None and a.status == "completed" and a.duration_s is not None:
            t.durations.append(a.duration_s)
    advice = ADVICE.get(language, ADVICE["python"])  # the worker's language (frameworks/base.py)
    found = [
        *(f for t in types.values() for f in _findings(t, framework, advice)),
        *_local_findings(locals_, wtt, advice),
    ]
    return Diagnosis(chain.workflow_id, framework, list(types.values()), locals_, wtt, sticky, found)


def _options(a) -> dict:
    retry = a.retry_policy if a.HasField("retry_policy") else None
    return {
        "heartbeat_timeout_s": _secs(a.heartbeat_timeout),
        "start_to_close_s": _secs(a.start_to_close_timeout),
        "schedule_to_close_s": _secs(a.schedule_to_close_timeout),
        "maximum_attempts": retry.maximum_attempts if retry is not None else 0,
        "initial_interval_s": _secs(retry.initial_interval) if retry is not None else None,
    }


def _options_of(t: ActivityType) -> dict:
    return {
        k: getattr(t, k)
        for k in (
            "heartbeat_timeout_s",
            "start_to_close_s",
            "schedule_to_close_s",
            "maximum_attempts",
            "initial_interval_s",
        )
    }


def _local_type(marker) -> str:
    """A local activity marker's activity type, when its details say (the Core SDKs' `data` field)."""
    for key in ("data", "details"):
        payloads = marker.details.get(key)
        if payloads is None or not payloads.payloads:
            continue
        value = decode_payload(payloads.payloads[0])
        if isinstance(value, dict) and isinstance(value.get("activity_type"), str):
            return plain(value["activity_type"], 128)
    return "local activity"


def _findings(t: ActivityType, framework: str | None, advice: dict[str, str]) -> list[Finding]:
    out = []
    cost = t.kill_cost_s
    if cost is not None and cost >= KILL_COST_LIMIT_S:
        which = "heartbeat timeout" if t.heartbeat_timeout_s else "start-to-close (no heartbeat timeout)"
        run = f"; it usually runs {t.median_s:.2f} s" if t.median_s is not None else ""
        out.append(
            Finding(
                "kill-costs-timeout",
                t.name,
                f"a worker killed under it is retried only after its {which} of {fmt_s(cost)}{run}",
                _heartbeat_fix(t.cls, framework, advice),
            )
        )
    if t.maximum_attempts == 1:
        out.append(
            Finding(
                "single-attempt",
                t.name,
                "maximum_attempts=1: one kill fails the activity, and with it the workflow",
                f"{advice['retries']} and make the side effect once-only "
                "(checkpoint_tui.effects, or a key the receiver deduplicates)",
            )
        )
    return out


def _local_findings(locals_: dict[str, int], wtt: float | None, advice: dict[str, str]) -> list[Finding]:
    cost = fmt_s(wtt or 10.0)
    return [
        Finding(
            "local-activity",
            name,
            f"a local activity ({n} run): a kill under it costs the workflow task timeout ({cost}) and re-runs it "
            "from the start, with no heartbeat to notice sooner",
            advice["local"],
        )
        for name, n in locals_.items()
    ]


def _heartbeat_fix(cls: str, framework: str | None, advice: dict[str, str]) -> str:
    """The framework's own words for it, else the worker's SDK's."""
    module = get(framework)
    return module.heartbeat_fix(cls) if module is not None else advice["heartbeat"]
