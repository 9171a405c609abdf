"""The exactly-once key of a pydantic-ai tool call under `TemporalDurability`.

    @agent.tool
    async def send_email(ctx: RunContext[Deps], to: str, body: str) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(ctx))

`tool_call_key(ctx)` is `pydantic-ai:<workflow id>:<ctx.tool_call_id>`. The call id is made by the
model request activity and kept in history, so: an activity retry (a killed worker) has the same key
(`recovered` or `skipped`); a continue-as-new keeps the workflow id and carries the messages, so a
call redone after it keeps its key; a workflow reset to before the model request re-runs the request,
which makes a new call id (a new key: the tool sends again), while a reset between the request and
the tool keeps the call id from history (skipped). Duck-typed: it reads `ctx.tool_call_id` and does
not import pydantic_ai. One key per tool call: a tool with two effects suffixes it.
"""

from __future__ import annotations

from checkpoint_tui.integrations._keys import call_key

FRAMEWORK = "pydantic-ai"


def tool_call_key(ctx: object) -> str:
    """The key of this tool call: workflow id + `ctx.tool_call_id` (see the module doc)."""
    return call_key(FRAMEWORK, getattr(ctx, "tool_call_id", None))
