"""A Strands tool whose Temporal activity learns its tool-use id, for exactly-once keys.

`temporalio.strands_agents.workflow.activity_as_tool(fn)` hands the activity only the model's
arguments: the `toolUseId` stays in the workflow (and the next model request's messages), and nothing
else the activity can see names the call (its activity id restarts at a continue-as-new and is the
same for another call after a reset). Here the activity's first parameter is a `ToolCall` (tool-use
id and tool name) that the model never sees:

    @activity.defn
    async def send_email_guarded(call: ToolCall, to: str, body: str) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(call))

    TemporalAgent(model=..., tools=[guarded_activity_as_tool(send_email_guarded, start_to_close_timeout=...)])

`tool_call_key(call)` is `strands:<workflow id>:<toolUseId>`. The id is made by the model inside the
`invoke_model` activity, whose result history keeps, so: an activity retry (a killed worker) has the
same key (`recovered` or `skipped`); a reset to between the model request and the tool keeps the
request's result and so the id (`skipped`), while a reset to before the request re-runs it and the
model makes a new id (a new key: the tool sends again); a continue-as-new starts a new agent run,
whose model requests make new ids (the workflow id stays, so an id carried over in `messages=` keeps
its key). A model that repeats ids makes one key of all its calls. Imports Strands only when
`guarded_activity_as_tool` is called.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checkpoint_tui.integrations._keys import call_key

FRAMEWORK = "strands"


@dataclass(frozen=True)
class ToolCall:
    """What the guarded tool's activity receives first: the tool use the model asked for (the names
    are Strands' own, as its MCP call-tool activity takes them)."""

    tool_use_id: str
    tool_name: str


def tool_call_key(call: ToolCall) -> str:
    """The key of this tool call: workflow id + the model's toolUseId (see the module doc)."""
    return call_key(FRAMEWORK, getattr(call, "tool_use_id", None))


def guarded_activity_as_tool(fn: Callable[..., Any], **activity_options: Any) -> Any:
    """`activity_as_tool(fn, **activity_options)` for an activity whose first parameter (after any
    `self`) is a `ToolCall`: the model sees the other parameters; the activity gets the call first.
    Returns a Strands `AgentTool` named after the activity."""
    from temporalio import activity

    defn = activity._Definition.from_callable(fn)
    if defn is None or not defn.name:
        raise TypeError("guarded_activity_as_tool takes a named Temporal activity (@activity.defn)")
    call_param = _call_parameter(fn, defn.name)
    return _tool_class()(fn, activity_options, call_param)


def _call_parameter(fn: Callable[..., Any], name: str) -> str:
    """The name of `fn`'s ToolCall parameter: its first (after any `self`), annotated ToolCall."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    if not params:
        raise TypeError(f"{name}: the first parameter must take the ToolCall")
    if typing.get_type_hints(fn).get(params[0].name) is not ToolCall:
        raise TypeError(f"{name}: the first parameter ({params[0].name}) must be annotated ToolCall")
    return params[0].name


def _tool_class() -> type:
    """The guarded tool's class, built on first use so that importing this module imports no Strands.

    It is the integration's own `TemporalActivityTool` (a private class of temporalio-strands-agents
    0.1: the same activity options, error results and interrupts as `activity_as_tool`) with two
    changes: the spec the model sees leaves out the ToolCall parameter (Strands' `FunctionToolMetadata`
    drops its context parameter from the schema), and each call puts the ToolCall under that
    parameter's name before the arguments are bound to the activity's signature. The tests name this
    if an upgrade moves it (tests/test_strands_classify.py)."""
    from strands.tools.decorator import FunctionToolMetadata
    from temporalio.strands_agents._temporal_activity_tool import TemporalActivityTool

    class GuardedActivityTool(TemporalActivityTool):
        def __init__(self, fn: Callable[..., Any], options: dict[str, Any], call_param: str) -> None:
            super().__init__(fn, options)
            self._call_param = call_param
            spec = FunctionToolMetadata(fn, context_param=call_param).extract_metadata()
            spec["name"] = self._activity_name
            self._spec = spec

        async def stream(self, tool_use: Any, invocation_state: dict[str, Any], **kwargs: Any) -> Any:
            call = ToolCall(tool_use_id=tool_use["toolUseId"], tool_name=tool_use["name"])
            given = tool_use.get("input")
            # The model's arguments, then the call: a model that names the call's parameter cannot
            # stand in for it.
            arguments = {**(given if isinstance(given, dict) else {}), self._call_param: call}
            async for event in super().stream({**tool_use, "input": arguments}, invocation_state, **kwargs):
                yield event

    return GuardedActivityTool
