"""Chaos's records, typed: what a nemesis did (a `Hit`: when it landed, on which process, what it reports
beside; or a `Miss`: it found nothing to hit, and why), and what the chaos report lists (`Fired`: an
event of the schedule as it fired, where it landed and what it cost; `NotFired`: one that did not, and
why). The report's JSON is each record's `to_json()`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Hit:
    at: float  # when it landed (wall time)
    pid: int | None = None  # the process it hit; None: no process (a partition, a request to Temporal)
    identity: str | None = None  # the Temporal identity of the worker it killed
    detail: dict[str, Any] = field(default_factory=dict)  # its own figures, named as the chaos report names them


NO_WORKER = "no live worker at that moment"  # a Miss between a worker's death and its replacement


@dataclass(frozen=True)
class Miss:
    why: str  # e.g. NO_WORKER


@dataclass
class Fired:
    kind: str  # the nemesis (ChaosEvent.kind)
    step: int | None  # the unit it landed in: our loop's step, a user's workflow's activity (its place in the run)
    pid: int | None  # the process it hit, if any
    at: float  # when it landed
    detail: dict[str, Any] = field(default_factory=dict)  # where it landed and the nemesis's own figures
    # measured after the run, from durable data (None: no unit of work came after it)
    restart_s: float | None = None  # a kill: -> the run's next unit at work
    stalled_s: float | None = None  # its start -> the run's next unit at work after it ended
    recovery_s: float | None = None  # the end of it (SIGCONT, heal, unpause) -> the run's next unit at work
    landed: str | None = None  # a kill inside an activity: inside, as it completed, after it closed
    retry_s: float | None = None  # a kill inside an activity: -> that activity's next attempt started

    @property
    def identity(self) -> str | None:
        return self.detail.get("identity")

    def to_json(self) -> dict[str, Any]:
        found = {"restart_s": self.restart_s, "stalled_s": self.stalled_s, "recovery_s": self.recovery_s}
        landed = {"landed": self.landed} if self.landed is not None else {}
        landed |= {"retry_s": self.retry_s} if self.retry_s is not None else {}
        return {"kind": self.kind, "step": self.step, "pid": self.pid, "at": self.at, **self.detail, **found, **landed}


@dataclass(frozen=True)
class NotFired:
    event: dict[str, Any]  # the schedule's event, as its file writes it
    why: str

    def to_json(self) -> dict[str, Any]:
        return {**self.event, "why": self.why}
