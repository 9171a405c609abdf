"""The tool: `send_email`, run by the plugin's `deepagents.invoke_tool` activity (`tool_as_activity`).

The plugin's tool registry is keyed by the tool's name, process-wide, so one worker cannot register a
blind and a guarded tool both named `send_email`: the one tool appends directly under
`DeepAgentsMailer`, and through `checkpoint_tui.effects.exactly_once`, keyed by its tool call id,
under `DeepAgentsMailerGuarded` (the workflow type is in the activity's info)."""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Annotated

from langchain_core.tools import InjectedToolCallId, tool
from temporalio import activity
from temporalio.deepagents import tool_as_activity
from temporalio.exceptions import ApplicationError

from checkpoint_tui.effects import exactly_once
from checkpoint_tui.integrations.deepagents import tool_call_key

from mailroom import MAX_PACE_S, check_email, email_line, out_dir, output_path, send_paced

OUT_DIR = out_dir(dict(os.environ))  # read once, by the worker process that imports this module
GUARDED = "DeepAgentsMailerGuarded"
# Temporal needs a timeout on every activity; 10 s covers the longest pace (5 s). No heartbeat timeout
# and the default retry policy, as the framework ships them.
TOOL_TIMEOUT = timedelta(seconds=10)


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


@tool
async def send_email(to: str, body: str, pace: float, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    line, pace = _checked(to, body, pace)
    path = output_path(OUT_DIR, activity.info().workflow_id)
    if activity.info().workflow_type != GUARDED:
        await send_paced(path, line, pace, only_if_absent=False)
        return f"sent to {to}"

    # Once per tool call: the effects library decides whether to write; the write appends only a line
    # not already in the file (a `recovered` call redoes a write that may have been done). The call id
    # is the one the activity's input carries, which history keeps: a retried activity gets the same.
    async def write(payload: str) -> None:
        await send_paced(path, payload, pace, only_if_absent=True)

    outcome = await exactly_once(kind="email", payload=line, write=write, key=tool_call_key(tool_call_id))
    return f"sent to {to} ({outcome})"


# Registered at import, in every worker process (the activity looks the tool up by name).
SEND_EMAIL = tool_as_activity(send_email, start_to_close_timeout=TOOL_TIMEOUT)
