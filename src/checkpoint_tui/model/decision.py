"""The one decision shape every provider must produce, and its strict validation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Decision:
    """One step's decision, the same from every provider (and a workflow/activity payload)."""

    action: str  # "compute" | "note"
    args: dict[str, str]
    thought: str


class DecisionError(ValueError):
    """The model's answer is not a valid decision."""


def validate_decision(obj: Any) -> Decision:
    """Accept exactly {"action": "compute"|"note", "args": {...}, "thought": str}; coerce nothing."""
    if not isinstance(obj, dict):
        raise DecisionError("decision is not a JSON object")
    action, args, thought = obj.get("action"), obj.get("args"), obj.get("thought")
    if action not in ("compute", "note"):
        raise DecisionError(f"action must be 'compute' or 'note', got {action!r}")
    if not isinstance(args, dict):
        raise DecisionError("args must be an object")
    if not isinstance(thought, str):
        raise DecisionError("thought must be a string")
    key = "expression" if action == "compute" else "text"
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise DecisionError(f"{action} needs args.{key} as a non-empty string")
    return Decision(action=action, args={key: value}, thought=thought)
