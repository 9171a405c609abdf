"""The tool, twice: `send_email` (a plain append) and `send_email_guarded` (the same append inside
`checkpoint_tui.effects.exactly_once`, keyed by the model's tool call id, which LangGraph injects
through `InjectedToolCallId`). Both are named `send_email` for the model; they run inside the graph's
`tools` node, an activity."""

from __future__ import annotations

from typing import Annotated

from langchain_core.tools import InjectedToolCallId, tool

from checkpoint_tui.frameworks.langgraph import tool_call_key

from mailroom import send_email as send


@tool
async def send_email(to: str, body: str, pace: float) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    return await send(to, body, pace)


@tool("send_email")
async def send_email_guarded(to: str, body: str, pace: float, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Send one email to `to` (the send takes `pace` seconds)."""
    # Once per tool call: the effects library decides whether to write; the write appends only a line
    # not already in the file (a `recovered` call redoes a write that may have been done). The call id
    # is injected by LangGraph from the model's tool call, which history keeps: a retried `tools` node
    # gets the same one.
    return await send(to, body, pace, key=tool_call_key(tool_call_id))
