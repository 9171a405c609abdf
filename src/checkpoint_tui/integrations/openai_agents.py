"""An OpenAI Agents SDK tool whose Temporal activity learns its tool call id, for exactly-once keys.

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

from checkpoint_tui.integrations._keys import call_key

FRAMEWORK = "openai-agents"


@dataclass(frozen=True)
class ToolCall:
    """What the guarded tool's activity receives first: the call the model made."""

    call_id: str
    tool_name: str


def tool_call_key(call: ToolCall) -> str:
    """The key of this tool call: workflow id + the model's call id (see the module doc)."""
    return call_key(FRAMEWORK, getattr(call, "call_id", None))


def guarded_activity_as_tool(fn: Callable[..., Any], **activity_options: Any) -> Any:
    """`activity_as_tool(fn, **activity_options)` for an activity whose first parameter (after any
    `self`) is a `ToolCall`: the model sees the other parameters; the activity gets the call first.
    Returns an `agents.FunctionTool` named after the activity. Imports the SDK when called."""
    from agents import FunctionTool
    from agents.function_schema import function_schema
    from agents.tool_context import ToolContext
    from temporalio import activity, workflow
    from temporalio.exceptions import ApplicationError

    defn = activity._Definition.from_callable(fn)
    if defn is None or not defn.name:
        raise TypeError("guarded_activity_as_tool takes a named Temporal activity (@activity.defn)")
    schema = function_schema(_model_facing(fn, defn.name), strict_json_schema=True)

    async def invoke(ctx: Any, arguments: str) -> str:
        if not isinstance(ctx, ToolContext):  # the SDK hands a ToolContext to every function tool
            raise ApplicationError(f"{defn.name}: no tool call context", non_retryable=True)
        try:
            parsed = json.loads(arguments)
            args, _ = schema.to_call_args(schema.params_pydantic_model(**parsed))
        except Exception as err:  # the model's arguments: anything
            raise ApplicationError(f"invalid arguments for tool {defn.name}: {type(err).__name__}") from None
        call = ToolCall(call_id=ctx.tool_call_id, tool_name=ctx.tool_name)
        options = {"summary": schema.description or None, **activity_options}
        result = await workflow.execute_activity(defn.name, args=[call, *args], **options)
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
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    if not params:
        raise TypeError(f"{name}: the first parameter must take the ToolCall")
    hints = typing.get_type_hints(fn, include_extras=True)
    if hints.get(params[0].name) is not ToolCall:
        raise TypeError(f"{name}: the first parameter ({params[0].name}) must be annotated ToolCall")
    rest = params[1:]

    def stand_in(*_args: Any, **_kwargs: Any) -> Any:
        raise NotImplementedError("a schema stand-in: never called")

    stand_in.__signature__ = inspect.Signature(rest)  # type: ignore[attr-defined]
    stand_in.__annotations__ = {p.name: hints[p.name] for p in rest if p.name in hints}
    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__doc__ = fn.__doc__
    return stand_in
