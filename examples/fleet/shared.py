"""What the fleet's workers and a starter share: the task queues' defaults, the activity names, the
input types and their bounds, and how a worker process exits. Imported by workflow code too: nothing
here reads the environment."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from datetime import timedelta

from temporalio.common import RetryPolicy

DEFAULT_WORKFLOW_QUEUE = "fleet-workflows"  # the workflow worker's CHECKPOINT_TASK_QUEUE
DEFAULT_ACTIVITY_QUEUE = "fleet-activities"  # the activity worker's FLEET_ACTIVITY_QUEUE
SEND_RECEIPT = "send_receipt"
CHECK_MAIL_API = "check_mail_api"  # scheduled by v2 only (workflows_v2.py)
MAX_COUNT = 500
MAX_PACE_S = 600.0
MAX_ATTEMPTS = 100
MAX_START_TO_CLOSE_S = 300.0
MAX_QUEUE_NAME = 200


@dataclass
class FleetInput:
    """A run's input, e.g. `{"count": 8, "pace": 0.2}`: `count` receipts sent one after another on
    `activity_queue`, `pace` seconds apart. `max_attempts` 0 is Temporal's default (unlimited), 1 no
    retry; each attempt has `start_to_close_s` seconds."""

    count: int = 8
    pace: float = 0.2
    activity_queue: str = DEFAULT_ACTIVITY_QUEUE
    max_attempts: int = 0
    start_to_close_s: float = 10


@dataclass
class ReceiptInput:
    """One `send_receipt`: receipt `index` of the run `workflow_id`."""

    workflow_id: str
    index: int


def activity_options(inp: FleetInput) -> dict:
    """The options of every activity a run schedules. No heartbeat timeout: an attempt is judged by
    its start-to-close timeout alone (a killed activity worker's attempt is retried once it expires).
    Retries from 1 s, doubling, capped at 10 s so a long outage does not leave minutes between them."""
    return {
        "task_queue": inp.activity_queue,
        "start_to_close_timeout": timedelta(seconds=inp.start_to_close_s),
        "heartbeat_timeout": None,
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(seconds=1),
            maximum_interval=timedelta(seconds=10),
            maximum_attempts=inp.max_attempts,
        ),
    }


def parse_input(raw: object) -> FleetInput:
    """A run's input from its decoded JSON (or a FleetInput); missing keys take their defaults. A
    ValueError says why it cannot run; the workflow turns it into a non-retryable `BadInput` failure."""
    if raw is None:
        return FleetInput()
    if isinstance(raw, FleetInput):
        raw = asdict(raw)
    names = {f.name for f in fields(FleetInput)}
    if not isinstance(raw, dict) or not set(raw) <= names:
        raise ValueError(f'the input is a JSON object with any of {", ".join(sorted(names))}, e.g. {{"count": 8}}')
    inp = FleetInput(**raw)
    problem = (
        _bounded_int("count", inp.count, 1, MAX_COUNT)
        or _bounded_number("pace", inp.pace, 0, MAX_PACE_S)
        or _queue_problem(inp.activity_queue)
        or _bounded_int("max_attempts", inp.max_attempts, 0, MAX_ATTEMPTS)
        or _bounded_number("start_to_close_s", inp.start_to_close_s, 1, MAX_START_TO_CLOSE_S)
    )
    if problem is not None:
        raise ValueError(problem)
    return inp


def parse_receipt_input(raw: object) -> ReceiptInput:
    """`send_receipt`'s input from its decoded JSON; ValueError if it is not one a run would send."""
    if not isinstance(raw, dict) or set(raw) != {"workflow_id", "index"}:
        raise ValueError('the input is a JSON object with "workflow_id" and "index"')
    if not isinstance(raw["workflow_id"], str):
        raise ValueError(f"workflow_id must be a string (got {show(raw['workflow_id'])})")
    problem = _bounded_int("index", raw["index"], 1, MAX_COUNT)
    if problem is not None:
        raise ValueError(problem)
    return ReceiptInput(workflow_id=raw["workflow_id"], index=raw["index"])


def receipt_body(inp: ReceiptInput) -> str:
    """What one receipt says, built from the activity's input only (a recovered send must say the same);
    JSON, so no workflow id puts a NUL or a raw newline in it."""
    return json.dumps({"workflow_id": inp.workflow_id, "receipt": inp.index}, sort_keys=True)


def decode(decoder: Callable[[], object]) -> object:
    """A payload decoded by `decoder` (the SDK's converter, called here rather than by the SDK: an input
    it cannot decode would otherwise fail the workflow *task*, retried forever, or the activity with a
    retryable error). Anything it raises becomes a ValueError."""
    try:
        return decoder()
    except Exception as err:  # RecursionError included: it is a RuntimeError
        raise ValueError(f"the input cannot be decoded: {type(err).__name__}") from None


# Hostile input is refused, not clamped. Only comparisons touch the values: no float() of a huge
# integer (OverflowError), no str() of one (ValueError over 4300 digits).


def _bounded_int(name: str, value: object, low: int, high: int) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        return f"{name} must be an integer {low}..{high} (got {show(value)})"
    return None


def _bounded_number(name: str, value: object, low: float, high: float) -> str | None:
    if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
        return f"{name} must be {low:g}..{high:g} seconds (got {show(value)})"  # NaN and infinities too
    return None


def _queue_problem(queue: object) -> str | None:
    if not isinstance(queue, str) or not 0 < len(queue) <= MAX_QUEUE_NAME or not queue.isprintable():
        return f"activity_queue must be a task queue name, 1..{MAX_QUEUE_NAME} printable characters (got {show(queue)})"
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


def exit_stopped() -> None:
    """Exit 0 without the interpreter's finalization: the SDK's Rust threads may still reach for Python
    while it finalizes, and abort the process after a clean stop ("PyGILState_Release: thread state
    ... must be current", exit 134; temporalio/sdk-python#300), which a supervisor would count as a
    crash. Everything is stopped and closed by now; only the logs need flushing."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
