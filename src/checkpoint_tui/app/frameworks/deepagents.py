"""deepagents's activities on Temporal, as history shows them (to be filled in: see the module's tests)."""

from __future__ import annotations

from checkpoint_tui.app.frameworks.units import ActivitySeen, UnitInfo, other, type_of

NAME = "deepagents"


def owns(activity_type: str) -> bool:
    return False


def recognises(seen: ActivitySeen) -> bool:
    return owns(type_of(seen))


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    return [other(s) for s in seen]
