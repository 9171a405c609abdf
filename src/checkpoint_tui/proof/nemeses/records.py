"""Chaos's records, typed: what a nemesis did (a `Hit`: when it landed, on which process, what it reports
beside; or a `Miss`: it found nothing to hit, and why). What the chaos report lists of them (`Fired`: an
event of the schedule as it fired, where it landed and what it cost; `NotFired`: one that did not, and
why) are the report's own records (proof/report/chaos.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkpoint_tui.proof.report.chaos import Fired, NotFired

__all__ = ["NO_WORKER", "Fired", "Hit", "Miss", "NotFired"]


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
