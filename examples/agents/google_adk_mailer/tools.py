"""The tool's two activities: `send_email` (a plain append) and `send_email_guarded` (the same append
inside `checkpoint_tui.effects.exactly_once`, keyed by the function call's id, which
`activity_as_tool` hands it in `tool_context`, a `ToolContextSnapshot` the model does not see)."""

from __future__ import annotations

import os

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.google_adk.workflow import ToolContextSnapshot

from checkpoint_tui.effects import exactly_once
from checkpoint_tui.integrations.google_adk import tool_call_key

from mailroom import MAX_PACE_S, check_email, email_line, out_dir, output_path, send_paced

OUT_DIR = out_dir(dict(os.environ))  # read once, by the worker process that imports this module


def _checked(to: str, body: str, pace: float) -> tuple[str, float]:
    """The line to append, from the model's arguments: refused (non-retryable) if it cannot be one."""
    workflow_id = activity.info().workflow_id or ""
    try:
        line = email_line(workflow_id, *check_email(workflow_id, to, body))
    except ValueError as err:
        raise ApplicationError(str(err), type="BadToolArgs", non_retryable=True) from None
    if not isinstance(pace, int | float) or isinstance(pace, bool) or not 0 <= pace <= MAX_PACE_S:
        raise ApplicationError(f"pace must be 0..{MAX_PACE_S:g} s", type="BadToolArgs", non_retryable=True)
    return line, float(pace)


@activity.defn
async def send_email(to: str, body: str, pace: float) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    line, pace = _checked(to, body, pace)
    await send_paced(output_path(OUT_DIR, activity.info().workflow_id), line, pace, only_if_absent=False)
    return f"sent to {to}"


@activity.defn
async def send_email_guarded(to: str, body: str, pace: float, tool_context: ToolContextSnapshot) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    # Once per function call: the effects library decides whether to write; the write appends only a
    # line not already in the file (a `recovered` call redoes a write that may have been done). The
    # docstring is the tool's description, for the model; ADK leaves `tool_context` out of its schema.
    line, pace = _checked(to, body, pace)
    path = output_path(OUT_DIR, activity.info().workflow_id)

    async def write(payload: str) -> None:
        await send_paced(path, payload, pace, only_if_absent=True)

    outcome = await exactly_once(kind="email", payload=line, write=write, key=tool_call_key(tool_context))
    return f"sent to {to} ({outcome})"
