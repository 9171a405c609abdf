"""What an agent framework's activities are, read from history alone: which framework ran a workflow
(`detect`) and, per activity, a model request, a tool call (with its name and call id), an MCP call
or other (`classify`). Pure functions over decoded payloads; no framework is imported (they are
workloads, not dependencies), and hostile payloads never raise."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from checkpoint_tui.app.frameworks import openai_agents, pydantic_ai
from checkpoint_tui.app.frameworks.units import ActivitySeen, UnitInfo, other

FRAMEWORKS: tuple[str, ...] = (pydantic_ai.NAME, openai_agents.NAME)
DETECT_LIMIT = 10_000  # activity types looked at: a framework shows itself in its first model request

__all__ = ["FRAMEWORKS", "ActivitySeen", "UnitInfo", "classify", "detect"]


def detect(activity_types: Iterable[str]) -> str | None:
    """The framework whose activity types appear first, or None (a plain workflow)."""
    for kind in islice(activity_types, DETECT_LIMIT):
        if not isinstance(kind, str) or len(kind) > 1000:
            continue
        if pydantic_ai.owns(kind):
            return pydantic_ai.NAME
        if openai_agents.owns(kind):
            return openai_agents.NAME
    return None


def classify(framework: str | None, seen: list[ActivitySeen]) -> list[UnitInfo]:
    """One unit per activity, in order. An unknown or None framework classifies generically: every
    activity "other", labelled by its type."""
    seen = list(seen)
    if framework == pydantic_ai.NAME:
        return pydantic_ai.classify(seen)
    if framework == openai_agents.NAME:
        return openai_agents.classify(seen)
    return [other(s) for s in seen]
