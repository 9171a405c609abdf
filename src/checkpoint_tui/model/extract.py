"""Find the decision in a model's answer: plain JSON, a fenced ```json block, JSON wrapped in prose
(a balanced-brace scan that respects strings and escapes), or JSON cut off by the token limit
(completed with json-repair). The shape is then validated strictly: nothing is coerced.

The text may come from a hostile server, so the work is bounded: only the first MAX_SCAN_CHARS are
looked at, json-repair sees at most MAX_REPAIR_CHARS, and nesting too deep for the parser is a
plain ExtractError. Callers on an event loop run it in a thread (see openai_compat.ask_model)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import json_repair

from checkpoint_tui.model.decision import Decision, DecisionError, validate_decision

MAX_SCAN_CHARS = 16_000  # a constrained answer is under 1,000; the rest of a longer one is ignored
MAX_REPAIR_CHARS = 1_000  # json-repair is pure Python (~0.3 ms a character at worst): a cut-off answer is shorter
FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)(?:```|$)", re.DOTALL)


class ExtractError(ValueError):
    """No valid decision could be found in the text."""


@dataclass(frozen=True)
class Extracted:
    decision: Decision
    method: str  # "json" | "fenced" | "scan" | "repaired"


def extract_decision(text: str, truncated: bool = False) -> Extracted:
    """Return the first valid decision in `text`, or raise ExtractError (and nothing else)."""
    if not isinstance(text, str) or not text.strip():
        raise ExtractError("empty answer")
    try:
        return _extract(text[:MAX_SCAN_CHARS], truncated)
    except RecursionError:  # anything nested deeper than the parsers go is not a decision
        raise ExtractError("answer nested too deeply") from None


def _extract(text: str, truncated: bool) -> Extracted:
    errors: list[str] = []
    for method, candidate in _candidates(text):
        try:
            return Extracted(validate_decision(candidate), method)
        except DecisionError as err:
            errors.append(f"{method}: {err}")
    if truncated or not errors:
        repaired = _repair(text)
        if repaired is not None:
            try:
                return Extracted(validate_decision(repaired), "repaired")
            except DecisionError as err:
                errors.append(f"repaired: {err}")
    raise ExtractError("; ".join(errors[:3]) or "no JSON object found")


def _candidates(text: str):
    stripped = text.strip()
    obj = _loads(stripped)
    if obj is not None:
        yield "json", obj
    for match in FENCE.finditer(text):
        obj = _loads(match.group(1).strip())
        if obj is not None:
            yield "fenced", obj
    for chunk in balanced_objects(text):
        obj = _loads(chunk)
        if obj is not None:
            yield "scan", obj


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError, RecursionError):
        return None


def _repair(text: str) -> Any:
    """Close a JSON object cut off mid-way (the answer hit max_tokens)."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        obj = json_repair.repair_json(text[start : start + MAX_REPAIR_CHARS], return_objects=True)
    except Exception:  # json-repair raises assorted errors on hostile input
        return None
    return obj if isinstance(obj, dict) else None


def balanced_objects(text: str, limit: int = 20):
    """Yield top-level {...} substrings, tracking strings and escapes so braces inside strings do not count."""
    found = 0
    i, n = 0, len(text)
    while i < n and found < limit:
        start = text.find("{", i)
        if start < 0:
            return
        depth, in_str, esc = 0, False, False
        for j in range(start, n):
            c = text[j]
            if in_str:
                if esc:
                    esc = False
                elif c == "\\":
                    esc = True
                elif c == '"':
                    in_str = False
            elif c == '"':
                in_str = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : j + 1]
                    found += 1
                    i = j + 1
                    break
        else:
            return  # unbalanced to the end: truncated
