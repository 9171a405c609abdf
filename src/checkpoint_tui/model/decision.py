"""The one decision shape every provider must produce, and its strict validation.

A decision's strings end up in a file, a notes row (SQLite or PostgreSQL), the outbox, Temporal
history and the terminal, so they are checked here, once, for what any of those would choke on or
misrender: NUL (PostgreSQL refuses it), lone surrogates (not encodable as UTF-8, so no database or
file takes them), other control characters (terminal escapes, carriage returns that hide text) and
bidirectional overrides (text that reads differently than it is stored). Tab and newline are allowed.
"""

# No `from __future__ import annotations` here: a Decision travels inside Temporal payloads, and the
# converter evaluates its annotations on every decode (typing.get_type_hints); as objects rather
# than strings they cost half the time (see loop_worker/shared.py).

import re
from dataclasses import dataclass
from typing import Any

# Upper bounds on what a model may hand us (the prompt asks for under 15 words; these leave room).
MAX_EXPRESSION_CHARS = 200  # the arithmetic tool's own limit
MAX_NOTE_CHARS = 500
MAX_THOUGHT_CHARS = 300

# C0 controls but tab and newline, DEL, C1 controls, lone surrogates, bidi embeddings/overrides/isolates.
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
REPLACEMENT = "\ufffd"


@dataclass
class Decision:
    """One step's decision, the same from every provider (and a workflow/activity payload)."""

    action: str  # "compute" | "note"
    args: dict[str, str]
    thought: str


class DecisionError(ValueError):
    """The model's answer is not a valid decision."""


def scrub(text: str, limit: int) -> str:
    """`text` made safe to store and show (forbidden characters replaced by U+FFFD), at most `limit`
    characters: for model output we keep as evidence (the guardrail's raw answer), never for a decision."""
    return FORBIDDEN.sub(REPLACEMENT, text[:limit])


def _check_text(name: str, value: Any, limit: int, required: bool) -> str:
    if not isinstance(value, str):
        raise DecisionError(f"{name} must be a string")
    if required and not value.strip():
        raise DecisionError(f"{name} must be a non-empty string")
    if len(value) > limit:
        raise DecisionError(f"{name} is {len(value)} characters (at most {limit})")
    bad = FORBIDDEN.search(value)
    if bad is not None:
        raise DecisionError(f"{name} contains a forbidden character U+{ord(bad.group()):04X} at {bad.start()}")
    return value


def validate_decision(obj: Any) -> Decision:
    """Accept exactly {"action": "compute"|"note", "args": {...}, "thought": str}; coerce nothing."""
    if not isinstance(obj, dict):
        raise DecisionError("decision is not a JSON object")
    action, args, thought = obj.get("action"), obj.get("args"), obj.get("thought")
    if not isinstance(action, str) or action not in ("compute", "note"):
        got = f"{action!r:.40}" if isinstance(action, str) else f"a {type(action).__name__}"
        raise DecisionError(f"action must be 'compute' or 'note', got {got}")
    if not isinstance(args, dict):
        raise DecisionError("args must be an object")
    thought = _check_text("thought", thought, MAX_THOUGHT_CHARS, required=False)
    key, limit = ("expression", MAX_EXPRESSION_CHARS) if action == "compute" else ("text", MAX_NOTE_CHARS)
    value = _check_text(f"args.{key}", args.get(key), limit, required=True)
    return Decision(action=action, args={key: value}, thought=thought)
