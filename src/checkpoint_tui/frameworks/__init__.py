"""Agent frameworks, one module each: how its Temporal integration's activities show in history
(model requests, tool calls with their names and call ids, MCP calls), the exactly-once keys its
tools give the effects library, and doctor's advice in its words (the interface: frameworks/base.py;
the registry that finds them, ours and other packages': frameworks/registry.py). No framework is
imported to read a history: they are workloads, not dependencies."""

from __future__ import annotations

from checkpoint_tui.frameworks.declared import Declared
from checkpoint_tui.frameworks.registry import Classifier, classify, detect, get, names, overridden
from checkpoint_tui.frameworks.units import ActivitySeen, UnitInfo

__all__ = ["ActivitySeen", "Classifier", "Declared", "UnitInfo", "classify", "detect", "get", "names", "overridden"]
