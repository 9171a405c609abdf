"""What a proving command (`--verify`, `chaos`) hands its outputs once its checks are done: the JUnit
file and the proof bundle are written from it (writer.py), the bundle's README too (readme.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.chaos import ChaosReport
from checkpoint_tui.proof.report.verify import VerifyReport
from checkpoint_tui.settings import Settings


@dataclass
class ProofRun:
    command: str  # e.g. "checkpoint-tui --verify"
    settings: Settings  # the home whose ledger holds the runs
    document: ChaosReport | VerifyReport  # the report, as --json writes it
    checks: Sequence[Check]
    wall_s: float
    run_ids: list[str] | None = None  # None: every run on the home's task queue
    properties: Mapping[str, object] = field(default_factory=dict)
