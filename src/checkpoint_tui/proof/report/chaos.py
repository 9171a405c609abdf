"""The chaos report (`chaos --json`, a proof bundle's report.json, each game-day experiment's), typed:
what every workload's run has, its target's own figures, the fleet's, the checks; with `--runs`, each
run's audit and checks and their totals; with `--until-covered`, the aimed rounds. `chaos
--every-window` writes an `EveryWindowReport` instead: a chaos report per window and the table.

`Fired` is the engine's own record of a fired event (proof/chaos/engine.py fills in what it cost after
the run) and the report's entry for it; docs/report.md describes every field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias

from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.audit import AuditRecord
from checkpoint_tui.proof.report.codec import SCHEMA, Json, JsonObject, decode_union, encode
from checkpoint_tui.proof.report.fields import flat, omitted, rest, version


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass
class Fired:
    """An event of the schedule as it fired: where it landed, the nemesis's own figures (`detail`,
    named as the report names them) and, measured after the run from durable data, what it cost
    (None: no unit of work came after it)."""

    kind: str  # the nemesis (ChaosEvent.kind)
    step: int | None  # the unit it landed in: our loop's step, a user's workflow's activity (its place in the run)
    pid: int | None  # the process it hit, if any
    at: float  # when it landed (wall time)
    detail: dict[str, Any] = rest()  # JSON values; each nemesis writes and reads its own (proof/nemeses/)
    restart_s: float | None = None  # a kill: -> the run's next unit at work
    stalled_s: float | None = None  # its start -> the run's next unit at work after it ended
    recovery_s: float | None = None  # the end of it (SIGCONT, heal, unpause) -> the run's next unit at work
    landed: str | None = omitted()  # a kill inside an activity: inside, as it completed, after it closed
    retry_s: float | None = omitted()  # a kill inside an activity: -> that activity's next attempt started

    def to_json(self) -> JsonObject:
        """As the report writes it: its figures beside its kind, then what it cost."""
        return encode(self)

    def _text(self, name: str) -> str | None:
        value = self.detail.get(name)
        return value if isinstance(value, str) else None

    @property
    def identity(self) -> str | None:
        """The Temporal identity of the worker it killed."""
        return self._text("identity")

    @property
    def label(self) -> str | None:
        """What the unit it landed in was (a user's activity: its class and name)."""
        return self._text("label")

    @property
    def window(self) -> str | None:
        """A crash point's window (proof/nemeses/hop.py)."""
        return self._text("window")

    @property
    def watchdog(self) -> str | None:
        """A hang: what the watchdog recorded when it killed the worker."""
        return self._text("watchdog")

    @property
    def execution(self) -> str | None:
        return self._text("execution")

    @property
    def activity_id(self) -> str | None:
        return None if (value := self.detail.get("activity_id")) is None else str(value)

    @property
    def fired_s(self) -> float | None:
        """An event placed by time: when it fired, in seconds after the run started."""
        return _number(self.detail.get("fired_s"))

    @property
    def duration_s(self) -> float | None:
        """A timed nemesis (a pause, a partition, ...): how long it held."""
        return _number(self.detail.get("duration_s"))

    @property
    def into_s(self) -> float | None:
        """A kill inside an activity: how far into the attempt it landed."""
        return _number(self.detail.get("into_s"))

    @property
    def usual_s(self) -> float | None:
        """The activity type's usual duration the kill was placed against."""
        return _number(self.detail.get("usual_s"))


@dataclass
class NotFired:
    """An event of the schedule that did not fire, as its schedule file writes it, and why."""

    event: dict[str, Json] = rest(required=True)
    why: str = ""

    def to_json(self) -> JsonObject:
        """As the report writes it: the event's keys, then `why`."""
        return encode(self)

    @property
    def nemesis(self) -> str:
        return str(self.event.get("nemesis", "?"))

    @property
    def at_step(self) -> int | None:
        value = self.event.get("at_step")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def at_s(self) -> float | None:
        return _number(self.event.get("at_s"))


@dataclass(frozen=True)
class Placement:
    """A worker death placed against one run's history: the window it landed in."""

    run_id: str
    event: str  # the worker event: kill | died
    pid: int | None
    at: float
    step: int | None  # the unit it landed in
    window: str


@dataclass(kw_only=True)
class NemesisFigures:
    """Our loop's figures of one nemesis kind: how many fired, their stalls and recoveries."""

    count: int = 0
    median_stall_s: float | None = None
    max_stall_s: float | None = None
    median_recovery_s: float | None = None
    max_recovery_s: float | None = None


@dataclass(kw_only=True)
class StepFigures:
    """Our loop's own report keys (proof/chaos/loop_target.py)."""

    nemeses: dict[str, NemesisFigures]
    worker_deaths_seen_by_supervisor: int


@dataclass(kw_only=True)
class ActivityFigures:
    """A user's workflow's own report keys (proof/chaos/workflow_target.py)."""

    workflow: str | None
    aim: str
    framework: str | None


TargetFigures: TypeAlias = StepFigures | ActivityFigures


@dataclass(kw_only=True)
class CommandEvents:
    """One worker command of the fleet: its queue, its command line and its worker events, counted."""

    queue: str
    command: str = ""
    version: str | None = omitted()  # its Worker Deployment Version's build id (--deployment)
    events: dict[str, int] = rest()  # spawn, respawn, died, exit, sigterm, kill, ...


@dataclass(kw_only=True)
class BacklogEvent:
    """A fleet event against the task-queue backlog: the peak from its start, the drain after its end."""

    name: str
    start: float | None = None
    end: float | None = None
    peak: int | None = None
    peak_at: float | None = None
    drain_s: float | None = None  # None: never drained


@dataclass(kw_only=True)
class QueuePeak:
    peak: int = 0
    peak_at: float | None = None


@dataclass(kw_only=True)
class Backlog:
    """The backlog sampled from Temporal over the run (proof/measure/backlog.py)."""

    samples: int = 0
    peak: int | None = None
    peak_at: float | None = None
    queues: dict[str, QueuePeak] = field(default_factory=dict)
    events: list[BacklogEvent] = field(default_factory=list)


@dataclass(kw_only=True)
class FleetFigures:
    """A game day's figures (proof/chaos/fleet_lab.py)."""

    commands: list[CommandEvents] = field(default_factory=list)
    backlog: Backlog | None = omitted()
    backlog_samples: str | None = omitted()  # the samples' file under run/
    dependencies: dict[str, dict[str, object]] | None = omitted()  # each --dependency proxy's stats, as it says them
    models: dict[str, dict[str, object]] | None = omitted()  # each --model-endpoint: its requests, each fault's cost


@dataclass(kw_only=True)
class RunRecord:
    """One of several runs under one schedule (--runs): its audit and its checks."""

    run_id: str | None = None
    audit: AuditRecord | None = None
    checks: list[Check] = field(default_factory=list)


@dataclass(kw_only=True)
class Totals:
    """The runs' audits summed (proof/chaos/run_totals.py): the whole-number figures, each list of
    calls counted, and how many runs completed."""

    runs: int = 0
    runs_completed: int = 0
    lost: int = 0
    duplicated: int = 0
    at_risk: int | None = omitted()  # a user's workflow's
    lost_work: int | None = omitted()  # units of lost work over the runs whose history was read; None: none was
    counts: dict[str, int] = rest()  # the audits' other whole-number figures and lists, by their name


@dataclass(kw_only=True)
class CoverageRound:
    """One aimed round of --until-covered: a run of its own."""

    run_id: str | None = None
    schedule: list[JsonObject] = field(default_factory=list)
    windows: dict[str, int] = field(default_factory=dict)
    audit: AuditRecord | None = None
    wall_s: float = 0.0


@dataclass(kw_only=True)
class Coverage:
    """--until-covered: the kill budget, the rounds, the windows aimed at and those never hit."""

    max_kills: int = 0
    kills: int = 0
    rounds: list[CoverageRound] = field(default_factory=list)
    wanted: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)  # window: why timing cannot reach it here


@dataclass(kw_only=True)
class TouchedFigures:
    """With --runs: the runs the worker deaths touched (an activity's next attempt came after one) and
    how soon each went on, over every touch (proof/chaos/touched.py)."""

    touches: int  # (death, run) pairs
    runs: int  # runs touched at least once
    next_attempt: dict[str, float]  # the death -> the interrupted activity's next attempt: p50_s, p99_s, max_s
    resumed: dict[str, float] = field(default_factory=dict)  # the death -> the run's next event: the same
    # touches whose next attempt came after a dev-server kill that fell between the death and it: that
    # attempt could start only once the server was back and the workers' polls had reconnected
    through_server_kill: int = 0


@dataclass(kw_only=True)
class TemporalRecord:
    """The Temporal cluster a report's runs ran against."""

    address: str
    namespace: str
    started_by_lab: bool  # the home's dev server (it may kill it), else a server the lab did not start
    data_converter: str | None = omitted()  # --data-converter MODULE:ATTR (its payload converter, codec)
    undecodable_payloads: int | None = omitted()  # of the histories read, payloads it could not read


@dataclass(kw_only=True)
class ChaosReport:
    """One chaos run's report (several runs' with --runs, its aimed rounds' with --until-covered)."""

    schema: int = version(SCHEMA)
    seed: int | None = None
    workload: str | None = None  # the workload's kind
    unit: str = "step"  # what a place counts: step (our loop) or activity (a user's workflow)
    steps: int = 0  # the units the schedule is placed over
    run_id: str | None = None  # the lead run: it places the events
    schedule: list[JsonObject] = field(default_factory=list)  # as a schedule file writes its events
    run_started_at: float = 0.0
    audit: AuditRecord | None = None  # the lead run's
    kills: list[Fired] = field(default_factory=list)
    pauses: list[Fired] = field(default_factory=list)  # pauses, hangs, partitions, activity and fleet nemeses
    resets: list[Fired] = field(default_factory=list)
    not_fired: list[NotFired] = field(default_factory=list)
    median_restart_s: float | None = None
    wall_s: float = 0.0
    windows: dict[str, int] = field(default_factory=dict)  # worker deaths per window
    kill_windows: list[Placement] = field(default_factory=list)
    figures: TargetFigures | None = flat()
    fleet: FleetFigures | None = omitted()
    checks: list[Check] = field(default_factory=list)
    runs: list[RunRecord] | None = omitted()
    totals: Totals | None = omitted()
    coverage: Coverage | None = omitted()
    temporal: TemporalRecord | None = omitted()  # absent in a report written before it was said
    touched: TouchedFigures | None = omitted()  # with --runs, once a worker death touched a run

    @property
    def audits(self) -> list[AuditRecord]:
        """Every run's audit (`runs`, else the lead's), then every aimed round's."""
        runs = [r.audit for r in self.runs or []] or [self.audit]
        rounds = [r.audit for r in self.coverage.rounds] if self.coverage is not None else []
        return [a for a in [*runs, *rounds] if a is not None]


@dataclass(kw_only=True)
class EveryWindow:
    rounds: dict[str, ChaosReport] = field(default_factory=dict)  # each window's chaos report
    table: dict[str, dict[str, str]] = field(default_factory=dict)  # tool: {window: what the kill did}


@dataclass(kw_only=True)
class EveryWindowReport:
    """`chaos --every-window`: a chaos run per crash point's window, the table, every round's checks."""

    schema: int = version(SCHEMA)
    every_window: EveryWindow
    checks: list[Check] = field(default_factory=list)
    wall_s: float = 0.0


ChaosDoc: TypeAlias = EveryWindowReport | ChaosReport


def read_chaos(value: object, path: str = "report") -> ChaosDoc:
    """A chaos report's JSON (json.loads's) as its record; a ReportError says where it does not fit."""
    found = decode_union(ChaosDoc, value, path)
    assert isinstance(found, EveryWindowReport | ChaosReport)
    return found
