"""The one adapter every workload implements: the app's `Workload` (core/workload.py: start, wait, the
timeline, the audit, status) plus what the proving tools ask of it, its chaos schedule and target and
its --verify plan. A capability is built once, against this class; an optional one is a flag here
(`shrinkable`), never a test of which workload it is."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from checkpoint_tui.core.workload import Workload
from checkpoint_tui.errors import Failed
from checkpoint_tui.ledger.rows import RunRow
from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.verify.plan import VerifyPlan
from checkpoint_tui.settings import Settings


@dataclass(frozen=True)
class Counts:
    """How many of each nemesis a seeded chaos schedule draws (chaos's flags)."""

    kills: int = 8
    pauses: int = 0
    partitions: int = 0
    resets: int = 0
    activity_pauses: int = 0
    activity_resets: int = 0
    server: bool = True  # the dev server is the lab's to kill (not a server it did not start)
    model_faults: int = 0  # a user's workflow only: put in front of the `models` endpoints
    models: tuple[str, ...] = ()  # the --model-endpoint names

    def as_kwargs(self) -> dict[str, Any]:
        """As the schedule generators take them (make_schedule, workload_schedule)."""
        return asdict(self)


class Adapter(Workload):
    shrinkable: ClassVar[bool] = False  # `chaos --shrink` can rerun subsets of a failing schedule of it

    bundles: ClassVar[bool] = False  # --proof bundles: their histories replay on checkpoint-tui's own code

    @abstractmethod
    def flags(self, units: int) -> tuple[list[str], list[str]]:
        """The words that name this workload in a report's reproducing command: (before the command,
        after it); `units`: how many units its schedule was placed over."""

    @abstractmethod
    def chaos_schedule(self, seed: int, counts: Counts) -> tuple[list[ChaosEvent], int]:
        """The seeded schedule over its units: (events, how many units the events are placed over)."""

    @abstractmethod
    def chaos_file(self, path: Path) -> tuple[list[ChaosEvent], int, int | None]:
        """A schedule file's events as they apply to it: (events, units, the file's seed)."""

    @abstractmethod
    def chaos_target(self, seed: int | None, aim: str = "any", placed: bool = True) -> ChaosTarget:
        """What chaos asks of a run of it (proof/chaos/targets.py). `aim`: which units the events land on
        (a user's workflow); `placed`: in-activity kills at a seeded fraction of the unit's usual
        duration (False: at the event's delay, as a schedule file says)."""

    @abstractmethod
    def verify_plan(self, settings: Settings) -> VerifyPlan:
        """Its --verify scenarios and how their figures are summed up (proof/verify/)."""

    # Each adapter, by the runs.kind it reads (registered as its class is defined; the package's
    # __init__ imports every adapter module before any of them can be used).
    _by_kind: ClassVar[dict[str, type[Adapter]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            Adapter._by_kind[cls.kind] = cls

    @classmethod
    @abstractmethod
    def from_row(cls, row: RunRow) -> Adapter:
        """The workload of a recorded run of this kind."""

    def of_run(self, row: RunRow) -> Workload:
        """The workload a recorded run of another kind is (each adapter reads its own kind's runs)."""
        adapter = Adapter._by_kind.get(row.kind)
        if adapter is None:
            raise Failed(f"{row.run_id[:80]} is a run of {row.kind[:40]!r}, which this checkpoint-tui does not know")
        return adapter.from_row(row)
