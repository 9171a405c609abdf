"""The tool's two activities: `send_email` (a plain append) and `send_email_guarded` (the same append
inside `checkpoint_tui.effects.exactly_once`, keyed by the function call's id, which
`activity_as_tool` hands it in `tool_context`, a `ToolContextSnapshot` the model does not see)."""

from __future__ import annotations

from temporalio import activity
from temporalio.google_adk.workflow import ToolContextSnapshot

from checkpoint_tui.frameworks.google_adk import tool_call_key

from mailroom import send_email as send


@activity.defn
async def send_email(to: str, body: str, pace: float) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    return await send(to, body, pace)


@activity.defn
async def send_email_guarded(to: str, body: str, pace: float, tool_context: ToolContextSnapshot) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    # Once per function call: the effects library decides whether to write; the write appends only a
    # line not already in the file (a `recovered` call redoes a write that may have been done). The
    # docstring is the tool's description, for the model; ADK leaves `tool_context` out of its schema.
    return await send(to, body, pace, key=tool_call_key(tool_context))
