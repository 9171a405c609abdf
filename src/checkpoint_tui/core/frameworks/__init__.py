"""What an agent framework's activities are, read from history alone: which framework ran a workflow
(`detect`) and, per activity, a model request, a tool call (with its name and call id), an MCP call
or other (`classify`). Pure functions over decoded payloads; no framework is imported (they are
workloads, not dependencies), and hostile payloads never raise."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

from checkpoint_tui.core.frameworks import deepagents, google_adk, langgraph, openai_agents, pydantic_ai, strands
from checkpoint_tui.core.frameworks.declared import Declared
from checkpoint_tui.core.frameworks.units import ActivitySeen, UnitInfo, other

# Each: NAME, owns(activity type), recognises(seen), classify(seen). Google ADK before Strands: both
# name their model activity invoke_model, and ADK's adapter tells its own by the payloads (Strands'
# takes the type alone).
ADAPTERS = (pydantic_ai, openai_agents, deepagents, langgraph, google_adk, strands)
FRAMEWORKS: tuple[str, ...] = tuple(a.NAME for a in ADAPTERS)
DETECT_LIMIT = 10_000  # activity types looked at: a framework shows itself in its first model request

# What classifies a workflow's activities: a framework's name (forced, or detected), or a declaration.
Framework = str | Declared | None

__all__ = ["FRAMEWORKS", "ActivitySeen", "Declared", "Framework", "UnitInfo", "classify", "detect", "overridden"]


def detect(activities: Iterable[ActivitySeen | str]) -> str | None:
    """The framework whose activities appear first, or None (a plain workflow). Each adapter recognises
    its own from the type and, where one cannot tell by the type alone (LangGraph's `<graph>.<node>`),
    the payloads; a bare type is an activity whose payloads did not decode."""
    for item in islice(activities, DETECT_LIMIT):
        seen = ActivitySeen(item, [], None, None) if isinstance(item, str) else item
        kind = getattr(seen, "activity_type", None)
        if not isinstance(seen, ActivitySeen) or not isinstance(kind, str) or len(kind) > 1000:
            continue
        for adapter in ADAPTERS:
            if adapter.recognises(seen):
                return adapter.NAME
    return None


def overridden(framework: Framework, seen: list[ActivitySeen]) -> str | None:
    """The framework to use instead of a forced one (--framework) that recognises none of the run's
    activities while another framework recognises them (a pydantic-ai agent run with --framework
    openai-agents: its model requests would be judged as tools, at risk); None to keep it."""
    if not isinstance(framework, str):
        return None
    forced = next((a for a in ADAPTERS if framework == a.NAME), None)
    found = detect(seen)
    if forced is None or found is None or found == framework:
        return None
    if any(forced.recognises(s) for s in islice(seen, DETECT_LIMIT)):
        return None  # it names some of them: a mixed workflow, the user's word stands
    return found


def classify(framework: Framework, seen: list[ActivitySeen]) -> list[UnitInfo]:
    """One unit per activity, in order. A declaration classifies by its globs; an unknown or None
    framework generically: every activity "other", labelled by its type."""
    seen = list(seen)
    if isinstance(framework, Declared):
        return framework.classify(seen)
    for adapter in ADAPTERS:
        if framework == adapter.NAME:
            return adapter.classify(seen)
    return [other(s) for s in seen]
