"""What the classifiers take and give, and the bounded readers they share. Everything here reads
values decoded from history, which anyone who can reach the namespace may have written: it accepts
any object, walks nested data by iteration with a budget, and never raises on what it finds."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

TEXT_LIMIT = 48  # characters of a name, id or type in a label (a terminal column, not a document)
SUMMARY_LIMIT = 200
DIGEST_NODES = 10_000  # values, containers and keys the canonical-JSON walk looks at, at most
DIGEST_DEPTH = 64
DIGEST_CHARS = 2 * 1024 * 1024  # characters of strings in it: Temporal's payload limit is 2 MB
INT_BITS = 1024  # a longer integer is not an argument anyone meant (and json.dumps refuses > 4300 digits)
ID_PREFIXES = ("pyd_ai_", "call_", "fc_", "tooluse_", "toolu_")  # shared by every id of a framework or provider
# control characters, and the format characters that reorder or hide text on a terminal (bidi overrides
# and isolates, zero-width ones, the BOM): a name holding them must not rewrite the line it is shown on
UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


@dataclass(frozen=True)
class ActivitySeen:
    """What the history reader gives, per activity in scheduling order."""

    activity_type: str
    args: list[object]  # each input payload JSON-decoded (None where it did not decode / too big)
    result: object  # the completion's first payload decoded, or None
    summary: str | None  # user-metadata summary from the scheduled event, if any


@dataclass(frozen=True)
class UnitInfo:
    """One activity as a unit of an agent's work."""

    cls: str  # "model" | "tool" | "mcp" | "other"
    name: str | None  # tool name, or the model name for a model request
    call_id: str | None
    args_digest: str | None  # short sha256 of the canonical JSON of the tool's arguments
    summary: str | None
    tokens: int | None  # input + output tokens from a model result's usage, else None
    label: str  # short, for a terminal: "model · scripted-mailer", "tool · send_email · call 3f2a…"


def clean(value: object, limit: int = TEXT_LIMIT) -> str | None:
    """A string for one line of a terminal: UNSAFE characters (newlines too) and runs of spaces made
    one space, at most `limit` characters (cut with an ellipsis); None for anything that is not a
    non-empty string. Only a bounded slice of a huge string is looked at."""
    if not isinstance(value, str):
        return None
    text = " ".join(UNSAFE.sub(" ", value[: limit * 4]).split())
    if not text:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def field(value: object, *path: str) -> object:
    """`value[k1][k2]...` through dicts only; None where a step is missing or not a dict."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def args_of(seen: object) -> list[object]:
    args = getattr(seen, "args", None)
    return list(args[:64]) if isinstance(args, list | tuple) else []  # no activity takes more arguments


def type_of(seen: object) -> str:
    kind = getattr(seen, "activity_type", None)
    return kind[:1000] if isinstance(kind, str) else ""


def summary_of(seen: object) -> str | None:
    return clean(getattr(seen, "summary", None), SUMMARY_LIMIT)


def short_id(call_id: str) -> str:
    """The distinctive part of a call id, for a label: a shared prefix dropped, six characters kept."""
    for prefix in ID_PREFIXES:
        if call_id.startswith(prefix) and len(call_id) > len(prefix):
            call_id = call_id[len(prefix) :]
            break
    return call_id if len(call_id) <= 6 else call_id[:6] + "…"


def call_id_of(value: object) -> str | None:
    """A call id as found in history: a non-empty printable string of bounded length, else None."""
    if not isinstance(value, str) or not 0 < len(value) <= 256 or not value.isprintable():
        return None
    return value


def tokens_of(
    usage: object, inputs: tuple[str, ...] = ("input_tokens",), outputs: tuple[str, ...] = ("output_tokens",)
) -> int | None:
    """Input + output tokens of a usage object, at the paths given (most frameworks name them
    input_tokens and output_tokens; the AI SDK inputTokens.total and outputTokens.total); None when
    either is missing or not a sane count."""
    counts = [field(usage, *inputs), field(usage, *outputs)]
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53 for n in counts):
        return None
    return counts[0] + counts[1]  # type: ignore[operator]


def digest(value: object) -> str | None:
    """12 hex characters of the sha256 of the canonical JSON of `value` (sorted keys, no spaces,
    ASCII), or None if it is not plain JSON data within the walk's budget."""
    if not _plain_json(value):
        return None
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)
    except (ValueError, TypeError, RecursionError):  # unreachable after the walk; never raised anyway
        return None
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:12]


def _plain_json(value: object) -> bool:
    """Whether `value` is JSON data (dicts with string keys, lists, strings, numbers, booleans, None)
    of at most DIGEST_NODES values, DIGEST_DEPTH levels and DIGEST_CHARS characters. Iterative, and a
    container's length is checked before its items are looked at."""
    stack: list[tuple[object, int]] = [(value, 0)]
    nodes = chars = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > DIGEST_NODES or depth > DIGEST_DEPTH:
            return False
        if isinstance(item, str):
            chars += len(item)
        elif isinstance(item, dict):
            if nodes + 2 * len(item) > DIGEST_NODES or not all(isinstance(k, str) for k in item):
                return False
            chars += sum(len(k) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            if nodes + len(item) > DIGEST_NODES:
                return False
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, int) and not isinstance(item, bool):
            if item.bit_length() > INT_BITS:
                return False
        elif not (item is None or isinstance(item, bool | float)):
            return False
        if chars > DIGEST_CHARS:
            return False
    return True


def other(seen: object, name: str | None = None) -> UnitInfo:
    """An activity that is no model request or tool call: labelled by its (shortened) type."""
    kind = type_of(seen)
    return UnitInfo("other", name, None, None, summary_of(seen), None, clean(kind) or "activity")


Turn = Callable[[int, int, list[int]], list["UnitInfo"]]


def by_turn(
    seen: list[ActivitySeen],
    model_types: Collection[str],
    model: Callable[[ActivitySeen], UnitInfo],
    turn: Turn,
    own: Callable[[str], bool],
    own_unit: Callable[[ActivitySeen], UnitInfo],
) -> list[UnitInfo]:
    """The shape the frameworks whose agent loop runs in the workflow share: each model request is a
    unit of its own (`model`); the activities after one request, up to the next, are the calls it made:
    `turn(request index (-1: none yet), next request's index, their indices)` gives their units. The
    framework's own other activities (`own` by type: MCP listings, sandbox operations) are `own_unit`'s."""
    units: list[UnitInfo | None] = [None] * len(seen)
    models = [i for i, s in enumerate(seen) if type_of(s) in model_types]
    for i in models:
        units[i] = model(seen[i])
    bounds = [*models, len(seen)]
    for k, start in enumerate([-1, *models]):
        rest = [i for i in range(start + 1, bounds[k]) if not own(type_of(seen[i]))]
        for i, unit in zip(rest, turn(start, bounds[k], rest), strict=True):
            units[i] = unit
    return [u if u is not None else own_unit(seen[i]) for i, u in enumerate(units)]


def mcp_unit(seen: object, server: str, tool: str | None, call_id: str | None, arguments: object) -> UnitInfo:
    """An MCP tool call a framework routed through its integration: `mcp · <server> · <tool> · call …`."""
    parts = ["mcp", server, tool or "?"] + ([f"call {short_id(call_id)}"] if call_id else [])
    return UnitInfo(
        "mcp",
        tool,
        call_id,
        digest(arguments) if arguments is not None else None,
        summary_of(seen),
        None,
        " · ".join(parts),
    )
