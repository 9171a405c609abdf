"""What the workflows, the activities and a starter share: the input types, their bounds, the task
queue's default name, and where a workflow's output file is."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_TASK_QUEUE = "user-worker-example"
MAX_COUNT = 500
MAX_PACE_S = 5.0
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


@dataclass
class SendInput:
    """A workflow's input, e.g. `{"count": 20, "pace": 0.2}`: `count` activities, each taking about
    `pace` seconds inside its write (so a kill lands mid-write)."""

    count: int = 20
    pace: float = 0.2


@dataclass
class LineInput:
    """One activity's input: send line `index` of `workflow_id`."""

    workflow_id: str
    index: int
    pace: float


def parse_input(raw: object) -> SendInput:
    """The workflow's input from its decoded JSON (or a SendInput). A ValueError says why it cannot
    run; the workflow turns it into a non-retryable `BadInput` failure."""
    if raw is None:
        return SendInput()
    if isinstance(raw, SendInput):
        raw = asdict(raw)
    if not isinstance(raw, dict) or not set(raw) <= {"count", "pace"}:
        raise ValueError('the input is a JSON object with "count" and/or "pace", e.g. {"count": 20, "pace": 0.2}')
    inp = SendInput(**raw)
    problem = input_problem(inp.count, inp.pace)
    if problem is not None:
        raise ValueError(problem)
    return inp


def parse_line_input(raw: object) -> LineInput:
    """An activity's input from its decoded JSON; ValueError if it is not one `SendLines` would send."""
    if not isinstance(raw, dict) or set(raw) != {"workflow_id", "index", "pace"}:
        raise ValueError('the input is a JSON object with "workflow_id", "index" and "pace"')
    if not isinstance(raw["workflow_id"], str):
        raise ValueError(f"workflow_id must be a string (got {show(raw['workflow_id'])})")
    problem = input_problem(raw["index"], raw["pace"])  # an index obeys the same bounds as a count
    if problem is not None:
        raise ValueError(problem)
    return LineInput(workflow_id=raw["workflow_id"], index=raw["index"], pace=float(raw["pace"]))


def decode(decoder: Callable[[], object]) -> object:
    """A payload decoded by `decoder` (the SDK's converter, called here rather than by the SDK: an
    input it cannot decode would otherwise fail the workflow *task*, retried forever, or the activity
    with a retryable error). Anything it raises (not JSON, more than 4300 digits in an integer,
    nesting deeper than the decoder recurses) becomes a ValueError."""
    try:
        return decoder()
    except Exception as err:  # RecursionError included: it is a RuntimeError
        raise ValueError(f"the input cannot be decoded: {type(err).__name__}") from None


def input_problem(count: object, pace: object) -> str | None:
    """Why the input cannot run, or None. Hostile input is refused, not clamped. Only comparisons
    touch the values: no float() or isfinite() of a huge integer (OverflowError), no str() of one
    (ValueError over 4300 digits)."""
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_COUNT:
        return f"count must be an integer 1..{MAX_COUNT} (got {show(count)})"
    if not isinstance(pace, int | float) or isinstance(pace, bool) or not 0 <= pace <= MAX_PACE_S:
        return f"pace must be 0..{MAX_PACE_S:g} seconds (got {show(pace)})"  # NaN and infinities too
    return None


def show(value: object) -> str:
    """A short, safe rendering of a hostile value for an error message."""
    if isinstance(value, bool | float) or (isinstance(value, int) and value.bit_length() <= 64):
        return repr(value)
    if isinstance(value, int):
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, str):
        return repr(value[:40])
    return f"a {type(value).__name__}"


def line_text(workflow_id: str, index: int) -> str:
    return f"{workflow_id} line {index}\n"


def output_name(workflow_id: str) -> str:
    """`<workflow_id>.txt` when the id is a plain file name (letters, digits, `._-`, not starting with
    a dot, at most 120 characters); otherwise a sanitized prefix, `+` and a hash of the whole id. A
    plain name never holds `+`, so no id's plain name is another id's hashed one; two ids never share
    a file and no id names a path outside the output folder."""
    safe = _UNSAFE.sub("_", workflow_id)
    if safe == workflow_id and 0 < len(safe) <= 120 and not safe.startswith("."):
        return f"{safe}.txt"
    digest = hashlib.sha256(workflow_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{safe.lstrip('.')[:80] or 'workflow'}+{digest}.txt"


def output_path(out_dir: Path, workflow_id: str) -> Path:
    return out_dir / output_name(workflow_id)
