"""The verdict read where a user's effects land (ledger/destination.py), as the seed reads its outbox:
what a run added to each destination, read before and after it, and which ids it added more than once.

An id the run added a copy of while one was there already is DUPLICATED, named with the tool calls
whose arguments it came from (history's decoded payloads, matched by content). A re-executed tool call
that no duplicate names had its effect once at the destination: it passes, whatever guards it (the
effects library, a unique constraint, an API's idempotency key). Without a destination, a re-executed
call outside the library stays at risk (core/activity_audit.py)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from checkpoint_tui.core.activity_history import ActivityExec
from checkpoint_tui.errors import UsageError
from checkpoint_tui.files import read_input, write_output
from checkpoint_tui.ledger.destination import Destination, read_ids

MAX_LEAVES = 64  # argument strings looked at per call
MAX_NAMED = 200  # duplicate ids named per destination (the count is whole)
MAX_MATCHED = 20_000  # ids the run added that are matched to the calls they came from
MAX_ID = 1000  # an id as kept
_EFFECT_CLASSES = ("tool", "mcp", "other")  # what may have an effect (model requests have none of their own)


@dataclass
class DestinationDiff:
    label: str
    new: int = 0  # copies of effects the run added
    duplicates: list[tuple[str, int, int]] = field(default_factory=list)  # (id, copies now, copies beyond one)
    extra: int = 0  # copies the run added beyond one: the seed's COUNT(*) - COUNT(DISTINCT id), for the run
    added: list[str] = field(default_factory=list)  # every id the run added a copy of
    again: list[str] = field(default_factory=list)  # ids there before the run that it added once more
    error: str | None = None  # the read after the run failed: nothing is credited


def diff(label: str, before: Counter[str], after: Counter[str]) -> DestinationDiff:
    """What the run added: every id whose count grew, and those that now stand more than once because of it
    (an id there once before and added again is a duplicate; one there twice before is not the run's)."""
    d = DestinationDiff(label)
    for key, n in after.items():
        was = before.get(key, 0)
        if n <= was:
            continue
        d.new += n - was
        d.added.append(key)
        if n - was > 1:  # the run itself put it there twice or more
            d.extra += n - was - 1
            d.duplicates.append((key, n, n - was - 1))
        elif was:  # there before the run, and once more now: another run's, or a re-run of the same input
            d.again.append(key)
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
            except (ValueError, RecursionError):  # not JSON after all, or nested past the stack: a plain string
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


class Calls:
    """A run's calls that may have effects, each with its argument strings (read once)."""

    def __init__(self, acts: Iterable[ActivityExec]) -> None:
        self.calls: list[tuple[ActivityExec, list[str]]] = []
        for act in acts:
            if act.cls in _EFFECT_CLASSES:
                leaves: list[str] = []
                _leaves(act.args, leaves)
                self.calls.append((act, leaves))

    def callers(self, effect_id: str) -> list[ActivityExec]:
        """The calls an id came from, by content: those whose arguments it holds most of."""
        scored = [(s, act) for act, leaves in self.calls if (s := _score(effect_id, leaves)) > 0]
        if not scored:
            return []
        best = max(s for s, _ in scored)
        tied = [a for s, a in scored if s == best]
        return [a for a in tied if a.re_executed] or tied  # a tie goes to the calls that ran more than once


def callers(effect_id: str, acts: Iterable[ActivityExec]) -> list[ActivityExec]:
    return Calls(acts).callers(effect_id)


def call_name(act: ActivityExec) -> str:
    tool = act.info.name if act.info is not None and act.cls in ("tool", "mcp") else None
    if tool:
        call = act.info.call_id if act.info is not None else None
        return f"{tool} call {str(call)[:48]}" if call else f"{tool} (activity {act.activity_id})"
    return f"{act.activity_type} activity {act.activity_id}"


def assign(diffs: list[DestinationDiff], runs: dict[str, list[ActivityExec]], lead: str) -> dict[str, list[dict]]:
    """Each duplicate to one run: the first whose calls it came from (the lead when none matches)."""
    calls = {r: Calls(acts) for r, acts in runs.items()}
    out: dict[str, list[dict]] = {r: [] for r in runs}
    for d in diffs:
        for key, copies, extra in d.duplicates[:MAX_NAMED]:
            found = next(((r, c) for r in runs if (c := calls[r].callers(key))), (lead, []))
            out.setdefault(found[0], []).append(
                {
                    "destination": d.label,
                    "id": key[:200],
                    "copies": copies,
                    "extra": extra,
                    "calls": [call_name(a) for a in found[1][:5]],
                    "activity_ids": [a.activity_id for a in found[1]],
                }
            )
    return out


def effect_seen(diffs: list[DestinationDiff], acts: list[ActivityExec]) -> set[str]:
    """The activity ids of the calls some id the run added came from (by the same match as a duplicate's):
    only those are judged by the destination; a call none of whose effects landed there stays at risk."""
    calls, seen = Calls(acts), set[str]()
    for d in diffs:
        for key in d.added[:MAX_MATCHED]:
            seen.update(a.activity_id for a in calls.callers(key))
    return seen


def destination_line(dup: dict) -> str:
    made = f", made by {', '.join(dup['calls'])}" if dup["calls"] else " (no tool call's arguments name it)"
    return f"DUPLICATED at {dup['destination']}: {dup['id'][:120]!r} {dup['copies']} times{made}"


def read_after(dest: Destination, before: Counter[str], run_dir: Path | None = None) -> DestinationDiff:
    """The destination read again after the run, against `before`; a read that fails is said in the report
    (nothing is credited to it) rather than losing the run's report."""
    try:
        return diff(dest.label, before, read_ids(dest, run_dir))
    except UsageError as err:
        return DestinationDiff(dest.label, error=str(err)[:300])


# A run's reading is kept under run/ so that every verdict of it (chaos, `status`, the app) is the same one,
# read back after every process has gone. It is an artifact file: read bounded, its shape checked.
MAX_SAVED_BYTES = 8 * 1024 * 1024
MAX_SAVED_ADDED = 5_000  # ids the run added, kept for matching (past it, calls stay at risk: never a false pass)


def reading_path(run_dir: Path, run_id: str) -> Path:
    return run_dir / f"destinations-{hashlib.sha256(run_id.encode('utf-8', 'replace')).hexdigest()[:16]}.json"


def save(run_dir: Path, run_id: str, diffs: list[DestinationDiff], dups: list[dict]) -> None:
    doc = {
        "run_id": run_id,
        "duplicates": dups,
        "diffs": [
            {
                "label": d.label,
                "new": d.new,
                "extra": d.extra,
                "again": d.again[:MAX_NAMED],
                "error": d.error,
                "added": [k[:MAX_ID] for k in d.added[:MAX_SAVED_ADDED]],
                "duplicates": [[k[:MAX_ID], n, e] for k, n, e in d.duplicates[:MAX_NAMED]],
            }
            for d in diffs
        ],
    }
    write_output(reading_path(run_dir, run_id), json.dumps(doc), "a destination reading")


def load(run_dir: Path, run_id: str) -> tuple[list[DestinationDiff], list[dict]] | None:
    """The run's saved reading; None when there is none, or it is not one this lab wrote (said, not trusted)."""
    path = reading_path(run_dir, run_id)
    if not path.exists():
        return None
    try:
        doc = json.loads(read_input(path, "a destination reading", MAX_SAVED_BYTES, follow=False))
        if not isinstance(doc, dict) or doc.get("run_id") != run_id:
            return None
        diffs = [
            DestinationDiff(
                str(d["label"]),
                int(d["new"]),
                [(str(k), int(n), int(e)) for k, n, e in d["duplicates"]],
                int(d["extra"]),
                [str(k) for k in d["added"]],
                [str(k) for k in d["again"]],
                None if d["error"] is None else str(d["error"]),
            )
            for d in doc["diffs"]
        ]
        dups = [
            {
                "destination": str(x["destination"]),
                "id": str(x["id"]),
                "copies": int(x["copies"]),
                "extra": int(x["extra"]),
                "calls": [str(c) for c in x["calls"]],
                "activity_ids": [str(a) for a in x["activity_ids"]],
            }
            for x in doc["duplicates"]
        ]
    except (UsageError, ValueError, TypeError, KeyError, RecursionError):
        return None
    return diffs, dups
