"""The verdict read where a user's effects land (ledger/destination.py), as the seed reads its outbox:
what a run added to each destination, read before and after it, and which ids it added more than once.

An id the run added a copy of while one was there already is DUPLICATED, named with the tool calls
whose arguments it came from (history's decoded payloads, matched by content). A re-executed tool call
that no duplicate names had its effect once at the destination: it passes, whatever guards it (the
effects library, a unique constraint, an API's idempotency key). Without a destination, a re-executed
call outside the library stays at risk (app/activity_audit.py)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from checkpoint_tui.app.activity_history import ActivityExec

if TYPE_CHECKING:
    from checkpoint_tui.app.activity_audit import ActivityAudit

MAX_LEAVES = 64  # argument strings looked at per call
MAX_NAMED = 200  # duplicate ids named per destination (the count is whole)
_EFFECT_CLASSES = ("tool", "mcp", "other")  # what may have an effect (model requests have none of their own)


@dataclass
class DestinationDiff:
    label: str
    new: int = 0  # copies of effects the run added
    duplicates: list[tuple[str, int, int]] = field(default_factory=list)  # (id, copies now, copies beyond one)
    extra: int = 0  # copies beyond one of the ids the run touched: the seed's COUNT(*) - COUNT(DISTINCT id)


def diff(label: str, before: Counter[str], after: Counter[str]) -> DestinationDiff:
    """What the run added: every id whose count grew, and those that now stand more than once because of it
    (an id there once before and added again is a duplicate; one there twice before is not the run's)."""
    d = DestinationDiff(label)
    for key, n in after.items():
        was = before.get(key, 0)
        if n <= was:
            continue
        d.new += n - was
        extra = n - max(was, 1)
        if extra > 0:
            d.extra += extra
            d.duplicates.append((key, n, extra))
    d.duplicates.sort()
    return d


def _leaves(value: object, out: list[str], depth: int = 0) -> None:
    """The string leaves of a decoded payload (a JSON string inside it is opened once more)."""
    if len(out) >= MAX_LEAVES or depth > 8:
        return
    if isinstance(value, str):
        text = value.strip()
        if depth < 4 and text[:1] in "{[":
            try:
                _leaves(json.loads(text[:65536]), out, depth + 1)
                return
            except ValueError:
                pass
        if len(text) >= 3:
            out.append(text)
    elif isinstance(value, dict):
        for v in list(value.values())[:MAX_LEAVES]:
            _leaves(v, out, depth + 1)
    elif isinstance(value, list | tuple):
        for v in value[:MAX_LEAVES]:
            _leaves(v, out, depth + 1)


def _score(effect_id: str, leaves: list[str]) -> int:
    """How much of the call's arguments the id holds (or how much of the id one argument holds)."""
    held = sum(len(leaf) for leaf in set(leaves) if leaf in effect_id)
    holds = len(effect_id) if len(effect_id) >= 3 and any(effect_id in leaf for leaf in leaves) else 0
    return held + holds


def callers(effect_id: str, acts: Iterable[ActivityExec]) -> list[ActivityExec]:
    """The calls an id came from, by content: those whose arguments it holds most of."""
    scored = []
    for act in acts:
        if act.cls not in _EFFECT_CLASSES:
            continue
        leaves: list[str] = []
        _leaves(act.args, leaves)
        if (s := _score(effect_id, leaves)) > 0:
            scored.append((s, act))
    if not scored:
        return []
    best = max(s for s, _ in scored)
    tied = [a for s, a in scored if s == best]
    return [a for a in tied if a.re_executed] or tied  # a tie goes to the calls that ran more than once


def call_name(act: ActivityExec) -> str:
    tool = act.info.name if act.info is not None and act.cls in ("tool", "mcp") else None
    if tool:
        call = act.info.call_id if act.info is not None else None
        return f"{tool} call {str(call)[:48]}" if call else f"{tool} (activity {act.activity_id})"
    return f"{act.activity_type} activity {act.activity_id}"


def assign(diffs: list[DestinationDiff], runs: dict[str, list[ActivityExec]], lead: str) -> dict[str, list[dict]]:
    """Each duplicate to the runs whose calls it came from (to the lead when none matches)."""
    out: dict[str, list[dict]] = {r: [] for r in runs}
    for d in diffs:
        for key, copies, extra in d.duplicates[:MAX_NAMED]:
            found = {r: callers(key, acts) for r, acts in runs.items()}
            owners = [r for r, calls in found.items() if calls] or [lead]
            for r in owners:
                calls = found.get(r) or []
                out[r].append({"destination": d.label, "id": key[:200], "copies": copies, "extra": extra,
                               "calls": [call_name(a) for a in calls[:5]],
                               "activity_ids": [a.activity_id for a in calls]})  # fmt: skip
    return out


def destination_line(dup: dict) -> str:
    made = f", made by {', '.join(dup['calls'])}" if dup["calls"] else " (no tool call's arguments name it)"
    return f"DUPLICATED at {dup['destination']}: {dup['id'][:120]!r} {dup['copies']} times{made}"


def apply(audit: ActivityAudit, diffs: list[DestinationDiff], dups: list[dict]) -> None:
    """The destinations' reading in the run's audit: its duplicates are DUPLICATED (the seed's number), and
    every re-executed call at risk is judged by them: named by a duplicate, it is the duplicate's maker;
    else its effect stood once at the destination ("effect once") and it passes."""
    audit.destinations = [{"label": d.label, "new": d.new, "duplicates": d.extra} for d in diffs]
    named = {aid for d in dups for aid in d["activity_ids"]}
    audit.effect_once = [r for r in audit.at_risk if r["activity_id"] not in named]
    audit.at_risk = []
    audit.destination_duplicates = dups
    audit.duplicated_detail += [destination_line(d) for d in dups]
    audit.duplicated += sum(d["extra"] for d in dups)
