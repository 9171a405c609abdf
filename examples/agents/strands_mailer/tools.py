"""The tool's two activities: `send_email` (a plain append) and `send_email_guarded` (the same append
inside `checkpoint_tui.effects.exactly_once`, keyed by the model's toolUseId, which
`guarded_activity_as_tool` hands it as its first argument)."""

from __future__ import annotations

from temporalio import activity

from checkpoint_tui.frameworks.strands import ToolCall, tool_call_key

from mailroom import send_email as send


@activity.defn
async def send_email(to: str, body: str, pace: float) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    return await send(to, body, pace)


@activity.defn
async def send_email_guarded(call: ToolCall, to: str, body: str, pace: float) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    # Once per tool call: the effects library decides whether to write; the write appends only a line
    # not already in the file (a `recovered` call redoes a write that may have been done). The
    # docstring is the tool's description, for the model.
    return await send(to, body, pace, key=tool_call_key(call))
