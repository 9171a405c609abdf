"""The OpenAI Agents SDK's activities under `temporalio.openai_agents` (1.1, SDK 0.22), as history
shows them:
- `invoke_model_activity` (and `_streaming`): the model; its input names the model (`model_name`)
  and carries the conversation (`input`: items, the `function_call` ones with `call_id`, `name` and
  `arguments`); its result is a ModelResponse whose `output` holds the calls this request made and
  whose `usage` has `input_tokens` / `output_tokens`;
- `<server>-call-tool` / `-call-tool-v2` (and `-list-tools`, `-list-prompts`, `-get-prompt`...): MCP;
- any other activity of the run: a tool (`activity_as_tool` names it after the activity), whose
  input is only the model's arguments, positionally. Its call id is matched here from the calls of
  the model request before it (its result's `output`), else from the next model request's input
  (the calls new since the one before), by name and then by order.
  `checkpoint_tui.frameworks.openai_agents.guarded_activity_as_tool` also hands the tool its call
  as the first argument (`{"call_id", "tool_name"}`): used when nothing else matched.

Keys for the effects library. An OpenAI Agents SDK tool whose Temporal activity learns its tool call
id, for exactly-once keys.

`temporalio.openai_agents.workflow.activity_as_tool(fn)` hands the activity only the model's
arguments: the call id stays in the workflow (and the next model request's input). Here the
activity's first parameter is a `ToolCall` (call id and tool name) that the model never sees:

    @activity.defn
    async def send_email_guarded(call: ToolCall, to: str, body: str) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(call))

    Agent(..., tools=[guarded_activity_as_tool(send_email_guarded, start_to_close_timeout=...)])

`tool_call_key(call)` is `openai-agents:<workflow id>:<call id>`. The call id comes from the model's
response, which history keeps, so: an activity retry (a killed worker) has the same key (`recovered`
or `skipped`); a reset to before the model request re-runs it and the model makes a new call id (a
new key: the tool sends again), while a reset between the request and the tool keeps it (skipped); a
continue-as-new starts a new agent run, whose model makes new call ids. A model that repeats call ids
(the SDK's test `ResponseBuilders.tool_call` gives every call "call") makes one key of them all.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checkpoint_tui.frameworks.base import BY_TYPE, NO
from checkpoint_tui.frameworks.keys import call_key
from checkpoint_tui.frameworks.tool_call import (
    Call,
    activity_name,
    calls_in,
    handed,
    json_digest,
    match_calls,
    tool_call_parameter,
)
from checkpoint_tui.frameworks.units import (
    ActivitySeen,
    UnitInfo,
    args_of,
    by_turn,
    clean,
    digest,
    field,
    other,
    short_id,
    summary_of,
    tokens_of,
    type_of,
)

NAME = "openai-agents"
LANGUAGE = "python"
MODEL_TYPES = frozenset({"invoke_model_activity", "invoke_model_activity_streaming"})
MCP_SUFFIXES = ("-call-tool", "-call-tool-v2", "-list-tools", "-list-prompts", "-get-prompt", "-get-prompt-v2")
ITEM_LIMIT = 20_000  # conversation items looked at per model request


def owns(activity_type: str) -> bool:
    return activity_type in MODEL_TYPES


def recognises(seen: ActivitySeen) -> int:
    """By its activity type (the payloads add nothing a type does not say)."""
    return BY_TYPE if owns(type_of(seen)) else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    def turn(start: int, end: int, tools: list[int]) -> list[UnitInfo]:
        made = _calls_made(seen, start, end) if tools and start >= 0 else []
        return [
            _tool(seen[i], call)
            for i, call in zip(tools, match_calls([type_of(seen[i]) for i in tools], made), strict=True)
        ]

    return by_turn(seen, MODEL_TYPES, _model, turn, _is_mcp, _mcp_or_other)


def _model(seen: object) -> UnitInfo:
    first = (args_of(seen) or [None])[0]
    name = clean(field(first, "model_name"))
    label = f"model · {name}" if name else "model"
    result = getattr(seen, "result", None)
    return UnitInfo("model", name, None, None, summary_of(seen), tokens_of(field(result, "usage")), label)


def _tool(seen: object, call: Call | None) -> UnitInfo:
    name = clean(type_of(seen))
    given = handed(seen, "call_id")
    call = call or given
    parts = ["tool", name or "?"] + ([f"call {short_id(call.call_id)}"] if call else [])
    args = args_of(seen)  # the model's arguments as the activity got them, without a handed call
    model_digest = json_digest(call.arguments) if call and isinstance(call.arguments, str) else None
    args_digest = model_digest or digest(args[1:] if given else args)
    return UnitInfo(
        "tool", name, call.call_id if call else None, args_digest, summary_of(seen), None, " · ".join(parts)
    )


def _mcp_or_other(seen: object) -> UnitInfo:
    kind = type_of(seen)
    suffix = next((s for s in MCP_SUFFIXES if kind.endswith(s)), None)
    if suffix is None:
        return other(seen)
    server = clean(kind[: -len(suffix)], 24) or "server"
    if suffix.startswith("-call-tool"):
        first = (args_of(seen) or [None])[0]
        tool = clean(field(first, "tool_name")) or clean(field(first, "name"))
        return UnitInfo("mcp", tool, None, None, summary_of(seen), None, f"mcp · {server} · {tool or '?'}")
    return UnitInfo("other", None, None, None, summary_of(seen), None, f"mcp · {server} · {suffix[1:]}")


def _is_mcp(kind: str) -> bool:
    return kind.endswith(MCP_SUFFIXES)


def _calls_made(seen: list[ActivitySeen], model: int, next_model: int) -> list[Call]:
    """The calls model request `model` made: its result's output, else what the next request's input
    holds that this one's did not (a result that did not decode, e.g. too big)."""
    made = _calls(field(getattr(seen[model], "result", None), "output"))
    if made or next_model >= len(seen):
        return made
    before = {c.call_id for c in _calls(field((args_of(seen[model]) or [None])[0], "input"))}
    after = _calls(field((args_of(seen[next_model]) or [None])[0], "input"))
    return [c for c in after if c.call_id not in before]


def _calls(items: object) -> list[Call]:
    """The `function_call` items of a list of conversation items, in order, each call id once."""
    return calls_in(items, "function_call", ("call_id", "name", "arguments"), ITEM_LIMIT)


@dataclass(frozen=True)
class ToolCall:
    """What the guarded tool's activity receives first: the call the model made."""

    call_id: str
    tool_name: str


def tool_call_key(call: ToolCall) -> str:
    """The key of this tool call: workflow id + the model's call id (see the module doc)."""
    return call_key(NAME, getattr(call, "call_id", None))


def guarded_activity_as_tool(fn: Callable[..., Any], **activity_options: Any) -> Any:
    """`activity_as_tool(fn, **activity_options)` for an activity whose first parameter (after any
    `self`) is a `ToolCall`: the model sees the other parameters; the activity gets the call first.
    Returns an `agents.FunctionTool` named after the activity. Imports the SDK when called."""
    from agents import FunctionTool
    from agents.function_schema import function_schema
    from agents.tool_context import ToolContext
    from temporalio import workflow
    from temporalio.exceptions import ApplicationError

    name = activity_name(fn)
    schema = function_schema(_model_facing(fn, name), strict_json_schema=True)

    async def invoke(ctx: Any, arguments: str) -> str:
        if not isinstance(ctx, ToolContext):  # the SDK hands a ToolContext to every function tool
            raise ApplicationError(f"{name}: no tool call context", non_retryable=True)
        try:
            parsed = json.loads(arguments)
            args, _ = schema.to_call_args(schema.params_pydantic_model(**parsed))
        except Exception as err:  # the model's arguments: anything
            raise ApplicationError(f"invalid arguments for tool {name}: {type(err).__name__}") from None
        call = ToolCall(call_id=ctx.tool_call_id, tool_name=ctx.tool_name)
        options = {"summary": schema.description or None, **activity_options}
        result = await workflow.execute_activity(name, args=[call, *args], **options)
        return str(result)

    return FunctionTool(
        name=schema.name,
        description=schema.description or "",
        params_json_schema=schema.params_json_schema,
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


def _model_facing(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """A stand-in for `fn` without its `self` and `ToolCall` parameters, for the SDK's schema: it reads
    the signature, the (resolved) type hints, the name and the docstring, and never calls it."""
    rest = tool_call_parameter(fn, name, ToolCall)[1:]
    hints = typing.get_type_hints(fn, include_extras=True)

    def stand_in(*_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError("a schema stand-in: never called")

    stand_in.__signature__ = inspect.Signature(rest)  # type: ignore[attr-defined]
    stand_in.__annotations__ = {p.name: hints[p.name] for p in rest if p.name in hints}
    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = fn.__doc__
    return stand_in


def heartbeat_fix(cls: str) -> str:
    """How a killed worker's attempt of this class fails fast, in the OpenAI Agents SDK's words."""
    if cls == "model":
        return (
            "the plugin's model activity does not heartbeat: keep ModelActivityParameters("
            "start_to_close_timeout=...) near your longest model call, and let the lab's supervisor "
            "fail a dead worker's attempt early"
        )
    return (
        "heartbeat from the tool's activity (activity.heartbeat() about every second) and pass "
        "heartbeat_timeout=timedelta(seconds=5) to activity_as_tool(...)"
    )
