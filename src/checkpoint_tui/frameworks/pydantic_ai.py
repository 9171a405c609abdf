"""pydantic-ai's activities under `TemporalDurability`, as history shows them (pydantic-ai 2.68):
- `agent__<agent>__model_request` (and `_stream`): the model, named by its summary (`request model:
  <system>:<model>`) else its result's `model_name`; the result, a ModelResponse, has
  `usage.input_tokens` / `usage.output_tokens`;
- `agent__<agent>__toolset__<toolset>__call_tool` (function and dynamic toolsets; for the agent's
  own tools the toolset id is the literal `<agent>`): a tool call; its first argument holds the tool
  name (`name`), the model's arguments (`tool_args`) and the call id
  (`serialized_run_context.tool_call_id`); its second the run's deps;
- `agent__<agent>__mcp_server__<id>__call_tool`: an MCP tool call, the same first argument;
- anything else (`__get_tools`, `__validate_args`, `__event_stream_handler`, `__capability__...`,
  `__model_compact_messages`, ...): other.

Keys for the effects library. The exactly-once key of a pydantic-ai tool call under `TemporalDurability`.

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

import re

from checkpoint_tui.frameworks.base import BY_TYPE, NO
from checkpoint_tui.frameworks.keys import call_key
from checkpoint_tui.frameworks.units import (
    ActivitySeen,
    UnitInfo,
    args_of,
    call_id_of,
    clean,
    digest,
    field,
    other,
    short_id,
    summary_of,
    tokens_of,
    type_of,
)

NAME = "pydantic-ai"
LANGUAGE = "python"
_MODEL = re.compile(r"agent__.+__model_request(?:_stream)?")
_CALL = re.compile(r"agent__.+__(?P<kind>toolset|dynamic_toolset|mcp_server)__(?P<toolset>.+)__call_tool")
_SUMMARY_MODEL = "request model: "


def owns(activity_type: str) -> bool:
    """An activity type only pydantic-ai's Temporal integration makes."""
    return bool(_MODEL.fullmatch(activity_type) or _CALL.fullmatch(activity_type))


def recognises(seen: ActivitySeen) -> int:
    """By its activity type (the payloads add nothing a type does not say)."""
    return BY_TYPE if owns(type_of(seen)) else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    return [_unit(s) for s in seen]


def _unit(seen: object) -> UnitInfo:
    kind = type_of(seen)
    if _MODEL.fullmatch(kind):
        return _model(seen)
    call = _CALL.fullmatch(kind)
    if call:
        return _tool(seen, "mcp" if call["kind"] == "mcp_server" else "tool", call["toolset"])
    return other(seen)


def _model(seen: object) -> UnitInfo:
    result = getattr(seen, "result", None)
    summary = summary_of(seen)
    # The summary names the model as requested (`function:scripted-mailer`, `openai:gpt-5`) from the
    # moment it is scheduled; the result's `model_name` only once it completed (and as the provider
    # resolved it): the summary first, so that a unit keeps its name when its request completes.
    name = clean(summary[len(_SUMMARY_MODEL) :]) if summary and summary.startswith(_SUMMARY_MODEL) else None
    name = name or clean(field(result, "model_name"))
    # the label drops the provider (`openai:` of `openai:gpt-5`): a terminal column has no room for it
    label = f"model · {name.split(':', 1)[-1]}" if name else "model"
    return UnitInfo("model", name, None, None, summary, tokens_of(field(result, "usage")), label)


def _tool(seen: object, cls: str, toolset: str) -> UnitInfo:
    first = (args_of(seen) or [None])[0]
    name = clean(field(first, "name"))
    call_id = call_id_of(field(first, "serialized_run_context", "tool_call_id"))
    tool_args = field(first, "tool_args")
    parts = [cls]
    if cls == "mcp":
        parts.append(clean(toolset, 24) or "server")
    parts.append(name or "?")
    if call_id:
        parts.append(f"call {short_id(call_id)}")
    return UnitInfo(
        cls,
        name,
        call_id,
        digest(tool_args) if tool_args is not None else None,
        summary_of(seen),
        None,
        " · ".join(parts),
    )


def tool_call_key(ctx: object) -> str:
    """The key of this tool call: workflow id + `ctx.tool_call_id` (see the module doc)."""
    return call_key(NAME, getattr(ctx, "tool_call_id", None))


def heartbeat_fix(cls: str) -> str:
    """How a killed worker's attempt of this class fails fast, in pydantic-ai's words."""
    if cls == "model":
        return (
            "TemporalAgent(..., model_activity_config=ActivityConfig(heartbeat_timeout=timedelta(seconds=5)))"
            ": its activities already heartbeat in the background"
        )
    return (
        "TemporalAgent(..., toolset_activity_config={'<toolset id>': ActivityConfig("
        "heartbeat_timeout=timedelta(seconds=5))}): pydantic-ai sets none on tools by default, though "
        "its activities heartbeat in the background"
    )
