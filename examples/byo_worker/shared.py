"""What the workflows, the activities and a starter share: the input types, their bounds, the task
queue's default name, and where a workflow's output file is."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

DEFAULT_TASK_QUEUE = "byo-example"
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
    """The workflow's input from its JSON (or a SendInput). Parsed here rather than by the SDK's
    converter: an input the converter cannot fit to the dataclass fails the workflow *task*, which
    Temporal retries forever; a ValueError here fails the workflow once, saying why."""
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


def input_problem(count: object, pace: object) -> str | None:
    """Why the input cannot run, or None. Hostile input is refused, not clamped."""
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_COUNT:
        return f"count must be an integer 1..{MAX_COUNT} (got {str(count)[:40]!r})"
    if not isinstance(pace, int | float) or isinstance(pace, bool) or not math.isfinite(pace):
        return f"pace must be a number of seconds (got {str(pace)[:40]!r})"
    if not 0 <= pace <= MAX_PACE_S:
        return f"pace must be 0..{MAX_PACE_S:g} s (got {pace:g})"
    return None


def line_text(workflow_id: str, index: int) -> str:
    return f"{workflow_id} line {index}\n"


def output_name(workflow_id: str) -> str:
    """`<workflow_id>.txt` when the id is a plain file name (letters, digits, `._-`, not starting with
    a dot, at most 120 characters); otherwise a sanitized prefix plus a hash of the whole id, so two
    ids never share a file and no id names a path outside the output folder."""
    safe = _UNSAFE.sub("_", workflow_id)
    if safe == workflow_id and 0 < len(safe) <= 120 and not safe.startswith("."):
        return f"{safe}.txt"
    digest = hashlib.sha256(workflow_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{safe.lstrip('.')[:80] or 'workflow'}-{digest}.txt"


def output_path(out_dir: Path, workflow_id: str) -> Path:
    return out_dir / output_name(workflow_id)
