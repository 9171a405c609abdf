"""The tool: `send_email`, run by the plugin's `deepagents.invoke_tool` activity (`tool_as_activity`).

The plugin's tool registry is keyed by the tool's name, process-wide, so one worker cannot register a
blind and a guarded tool both named `send_email`: the one tool appends directly under
`DeepAgentsMailer`, and through `checkpoint_tui.effects.exactly_once`, keyed by its tool call id,
under `DeepAgentsMailerGuarded` (the workflow type is in the activity's info)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from langchain_core.tools import InjectedToolCallId, tool
from temporalio import activity
from temporalio.deepagents import tool_as_activity

from checkpoint_tui.frameworks.deepagents import tool_call_key

from mailroom import send_email as send

GUARDED = "DeepAgentsMailerGuarded"
# Temporal needs a timeout on every activity; 10 s covers the longest pace (5 s). No heartbeat timeout
# and the default retry policy, as the framework ships them.
TOOL_TIMEOUT = timedelta(seconds=10)


@tool
async def send_email(to: str, body: str, pace: float, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    # Guarded: once per tool call (the call id is the one the activity's input carries, which history
    # keeps: a retried activity gets the same); blind: a plain append.
    guarded = activity.info().workflow_type == GUARDED
    return await send(to, body, pace, key=tool_call_key(tool_call_id) if guarded else None)


# Registered at import, in every worker process (the activity looks the tool up by name).
SEND_EMAIL = tool_as_activity(send_email, start_to_close_timeout=TOOL_TIMEOUT)
