"""Runs of a user's own workflow (`--worker-cmd` with `--workflow TYPE --input JSON`): the lab picks the
workflow id, writes a `runs` row of kind `workflow` naming the type (so `status RUN`, `replay`'s listing
and the app find it) before the workflow starts, and writes the row's end once Temporal says the
workflow closed (nothing in a user's worker writes our runs table)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from checkpoint_tui.core.activity_history import read_activities
from checkpoint_tui.core.history import workflow_status
from checkpoint_tui.core.runs import LedgerCall, launch, on_this_thread, record_run
from checkpoint_tui.core.stuck import StuckWatch
from checkpoint_tui.core.view import FINAL_STATES
from checkpoint_tui.errors import UsageError
from checkpoint_tui.files import check_json_value
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.rows import WORKFLOW
from checkpoint_tui.ledger.store import connect, finish_run
from checkpoint_tui.settings import Settings

MAX_INPUT_BYTES = 64 * 1024
WORKFLOW_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
WAIT_EVERY_S = 0.2
NO_INPUT = object()  # --input not given: the workflow starts with no argument
PROGRESS_EVERY_S = 1.0


def check_workflow_type(text: str) -> str:
    if not WORKFLOW_TYPE.fullmatch(text):
        raise UsageError(
            f"--workflow takes a workflow type name ([A-Za-z_][A-Za-z0-9_.-]*, at most 128), not {text[:40]!r}"
        )
    return text


def parse_input(text: str) -> Any:
    """The workflow's input: one JSON value of at most 64 KiB (no NaN or Infinity, at most 64 levels
    deep), proven encodable by Temporal's payload converter before anything starts."""
    raw = text.encode("utf-8", "surrogateescape")
    if len(raw) > MAX_INPUT_BYTES:
        raise UsageError(f"--input is {len(raw)} bytes; at most {MAX_INPUT_BYTES} (64 KiB)")

    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except RecursionError:
        raise UsageError("--input nests too deeply") from None
    except ValueError as err:
        raise UsageError(f"--input is not JSON: {str(err).splitlines()[0][:120]}") from None
    check_json_value(value, "--input")  # depth, NaN, and what the payload converter can encode
    return value


async def start_workflow_run(
    settings: Settings, client: Client, workflow: str, arg: Any, ledger_call: LedgerCall | None = None
) -> str:
    """Write the run row, then start the workflow on the lab's task queue; returns the workflow id.
    `ledger_call` runs the ledger writes elsewhere (the app's ledger thread)."""
    check_workflow_type(workflow)
    call = ledger_call or on_this_thread
    run_id = await call(lambda: record_run(settings, 0, 0.0, kind=WORKFLOW, workflow_type=workflow))
    await launch(settings, client, run_id, workflow, [] if arg is NO_INPUT else [arg], ledger_call=call)
    return run_id


async def wait_workflow_run(
    settings: Settings,
    client: Client,
    run_id: str,
    progress: bool = False,
    timeout: float | None = None,
    patience_s: float = 0.0,
) -> str | None:
    """Poll Temporal until the workflow closes (or `timeout`); the ledger row's end is written then.
    With `progress`, the completed activities on stderr. Returns Temporal's status."""
    deadline = None if timeout is None else time.monotonic() + timeout
    shown, last_progress = -1, 0.0
    watch = StuckWatch(client, run_id, patience_s)
    while deadline is None or time.monotonic() < deadline:
        try:
            status = await workflow_status(client, run_id)
        except RPCError:  # Temporal restarting: ask again
            status = "RUNNING"
        if status not in (None, "RUNNING"):
            record_end(settings, run_id, status)
            if progress:  # the last count is the closed run's, as `status` shows it (not the last poll's)
                await _show_progress(client, run_id, shown)
            return status
        if (stuck := await watch.check()) is not None:  # it cannot go on: said, not waited out
            return stuck
        if progress and time.monotonic() - last_progress >= PROGRESS_EVERY_S:
            last_progress = time.monotonic()
            shown = await _show_progress(client, run_id, shown)
        await asyncio.sleep(WAIT_EVERY_S)
    return None


async def _show_progress(client: Client, run_id: str, shown: int) -> int:
    try:
        acts = await read_activities(client, run_id)
    except RPCError:
        return shown
    done = sum(a.status == "completed" for a in acts)
    if done != shown:
        again = sum(a.re_executed for a in acts)
        print(f"{run_id}: {done}/{len(acts)} activities completed · re-executed {again}", file=sys.stderr, flush=True)
    return done


def record_end(settings: Settings, run_id: str, status: str) -> None:
    """The runs row's end, from Temporal's status (once; a closed workflow never reopens)."""
    conn = connect(settings.ledger)
    row = queries.run(conn, run_id)
    if row is not None and row.status == "running":
        finish_run(conn, run_id, FINAL_STATES.get(status, "failed"), None if status == "COMPLETED" else status)
