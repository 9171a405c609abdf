"""Strands' activities under `temporalio.strands_agents` (0.1, strands-agents 1.62), as history shows them:
- `invoke_model` (and `invoke_model_streaming`): the model; its input names the registered model
  (`model_name`) and carries the conversation (`messages`: the assistant's `toolUse` blocks with
  `toolUseId`, `name` and `input`); its result is the model's stream events as a list: a
  `contentBlockStart` whose `start.toolUse` holds the `toolUseId` and `name` of each call this request
  made, `contentBlockDelta`s with its `input` (a JSON string, in pieces), and a `metadata` event with
  `usage.inputTokens` / `usage.outputTokens`;
- `<server>-call-tool`: an MCP tool call (`TemporalMCPClient`); its input holds `tool_name`,
  `arguments` and `tool_use_id`; `<server>-list-tools`: the listing, other;
- `strands-sandbox-<operation>`: a `TemporalSandbox` command or file operation, other (it acts on the
  world, so a re-run is at risk);
- a tool: an activity named as a call of the model request before it (`activity_as_tool` names the
  tool after the activity), whose input is only the model's arguments, positionally. Its call id is
  matched here by name, in order, from that request's result, else from the next request's messages
  (the calls new since the one before). `checkpoint_tui.frameworks.strands.guarded_activity_as_tool`
  hands the tool its call as the first argument (`{"tool_use_id", "tool_name"}`): that one is the id
  the activity was keyed by, so it goes first. An activity no call names (a hook's, one before the
  first request) is other.

Keys for the effects library. A Strands tool whose Temporal activity learns its tool-use id, for exactly-once keys.

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

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from checkpoint_tui.frameworks.base import BY_TYPE, NO
from checkpoint_tui.frameworks.keys import call_key
from checkpoint_tui.frameworks.tool_call import (
    ARGUMENTS_LIMIT,
    Call,
    activity_name,
    handed,
    json_digest,
    tool_call_parameter,
)
from checkpoint_tui.frameworks.units import (
    ActivitySeen,
    UnitInfo,
    args_of,
    by_turn,
    call_id_of,
    clean,
    digest,
    field,
    mcp_unit,
    other,
    short_id,
    summary_of,
    type_of,
)

NAME = "strands"
LANGUAGE = "python"
MODEL_TYPES = frozenset({"invoke_model", "invoke_model_streaming"})
SANDBOX_PREFIX = "strands-sandbox-"
MCP_CALL, MCP_LIST = "-call-tool", "-list-tools"
EVENT_LIMIT = 20_000  # stream events, messages, or content blocks looked at per model request


def owns(activity_type: str) -> bool:
    """An activity type only Strands' Temporal integration makes (`invoke_model_activity` is the OpenAI
    Agents SDK's: an exact match, not a prefix)."""
    return activity_type in MODEL_TYPES or activity_type.startswith(SANDBOX_PREFIX)


def recognises(seen: ActivitySeen) -> int:
    """By its activity type. Google ADK's integration names its model activity `invoke_model` too, and
    tells its own by the payloads: a stronger word (frameworks/base.py)."""
    return BY_TYPE if owns(type_of(seen)) else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    def turn(start: int, end: int, rest: list[int]) -> list[UnitInfo]:
        made = _calls_made(seen, start, end) if rest and start >= 0 else []
        return _tools([seen[i] for i in rest], made)

    return by_turn(seen, MODEL_TYPES, _model, turn, _is_framework, _framework_other)


def _model(seen: object) -> UnitInfo:
    name = clean(field((args_of(seen) or [None])[0], "model_name"))
    tokens = _tokens(getattr(seen, "result", None))
    return UnitInfo("model", name, None, None, summary_of(seen), tokens, f"model · {name}" if name else "model")


def _tools(seen: list[ActivitySeen], made: list[Call] | None) -> list[UnitInfo]:
    """The activities after one model request: each a tool when it was handed its call, or a call of
    that request names it (by name, in order), or the request's calls are unknown; else other."""
    handed_calls = [handed(s, "tool_use_id") for s in seen]
    by_id = {c.call_id: c for c in made or []}
    by_name: dict[str | None, deque[Call]] = {}
    taken = {c.call_id for c in handed_calls if c is not None}
    for made_call in made or []:
        if made_call.call_id not in taken:
            by_name.setdefault(made_call.name, deque()).append(made_call)
    units = []
    for s, given in zip(seen, handed_calls, strict=True):
        same = by_name.get(type_of(s)) if given is None else None
        call: Call | None = same.popleft() if same else given
        if call is None and made is not None:
            units.append(other(s))
        else:  # a handed call's arguments are the model's, as the request made them
            units.append(_tool(s, call, by_id.get(call.call_id, call) if call else None, given is not None))
    return units


def _tool(seen: object, call: Call | None, made: Call | None, was_handed: bool) -> UnitInfo:
    name = clean(type_of(seen))
    parts = ["tool", name or "?"] + ([f"call {short_id(call.call_id)}"] if call else [])
    args = args_of(seen)  # the model's arguments as the activity got them, after a handed call
    args_digest = (_arguments_digest(made.arguments) if made else None) or digest(args[1:] if was_handed else args)
    return UnitInfo(
        "tool", name, call.call_id if call else None, args_digest, summary_of(seen), None, " · ".join(parts)
    )


def _is_framework(kind: str) -> bool:
    return kind in MODEL_TYPES or kind.startswith(SANDBOX_PREFIX) or kind.endswith((MCP_CALL, MCP_LIST))


def _framework_other(seen: object) -> UnitInfo:
    """An MCP call or listing, a sandbox operation: named by what it is."""
    kind = type_of(seen)
    if kind.startswith(SANDBOX_PREFIX):
        operation = clean(kind[len(SANDBOX_PREFIX) :], 24) or "?"
        return UnitInfo("other", None, None, None, summary_of(seen), None, f"sandbox · {operation}")
    listing = kind.endswith(MCP_LIST)
    server = clean(kind[: -len(MCP_LIST if listing else MCP_CALL)], 24) or "server"
    if listing:
        return UnitInfo("other", None, None, None, summary_of(seen), None, f"mcp · {server} · list-tools")
    first = (args_of(seen) or [None])[0]
    tool, call_id = clean(field(first, "tool_name")), call_id_of(field(first, "tool_use_id"))
    return mcp_unit(seen, server, tool, call_id, field(first, "arguments"))


def _calls_made(seen: list[ActivitySeen], model: int, next_model: int) -> list[Call] | None:
    """The calls model request `model` made: from its result's stream events, else what the next
    request's messages hold that this one's did not (a result that did not decode, e.g. too big);
    None when neither tells."""
    made = _streamed_calls(getattr(seen[model], "result", None))
    if made is not None or next_model >= len(seen):
        return made
    after = _message_calls(field((args_of(seen[next_model]) or [None])[0], "messages"))
    if after is None:
        return None
    before = _message_calls(field((args_of(seen[model]) or [None])[0], "messages")) or []
    known = {c.call_id for c in before}
    return [c for c in after if c.call_id not in known]


def _streamed_calls(events: object) -> list[Call] | None:
    """The tool uses of a model's stream events, in order, each id once; None if it is not a list.
    A call's id and name come with its block's start (or, from some providers, a delta); its input
    in the deltas' pieces until the block stops."""
    if not isinstance(events, list):
        return None
    found: dict[str, Call] = {}
    current: dict[str, object] = {}
    pieces: list[str] = []
    size = 0
    for event in events[:EVENT_LIMIT]:
        start = field(event, "contentBlockStart", "start", "toolUse")
        delta = field(event, "contentBlockDelta", "delta", "toolUse")
        if isinstance(start, dict):
            current, pieces, size = {"id": start.get("toolUseId"), "name": start.get("name")}, [], 0
        elif isinstance(delta, dict):
            for key, source in (("id", "toolUseId"), ("name", "name")):
                current.setdefault(key, delta.get(source))
            piece = delta.get("input")
            if isinstance(piece, str) and size <= ARGUMENTS_LIMIT:
                pieces.append(piece[: ARGUMENTS_LIMIT + 1])
                size += len(pieces[-1])
        elif isinstance(event, dict) and "contentBlockStop" in event and current:
            call_id = call_id_of(current.get("id"))
            if call_id is not None and call_id not in found:
                arguments = "".join(pieces) if size <= ARGUMENTS_LIMIT else None
                found[call_id] = Call(call_id, clean(current.get("name"), 256), arguments)
            current, pieces, size = {}, [], 0
    return list(found.values())


def _message_calls(messages: object) -> list[Call] | None:
    """The toolUse blocks of a conversation's messages, in order, each id once; None if it is not a
    list. At most EVENT_LIMIT messages and blocks are looked at in all."""
    if not isinstance(messages, list):
        return None
    found: dict[str, Call] = {}
    budget = EVENT_LIMIT
    for message in messages[:EVENT_LIMIT]:
        content = field(message, "content")
        blocks = content[:budget] if isinstance(content, list) else []
        budget -= len(blocks) + 1
        for block in blocks:
            use = field(block, "toolUse")
            call_id = call_id_of(field(use, "toolUseId"))
            if call_id is not None and call_id not in found:
                found[call_id] = Call(call_id, clean(field(use, "name"), 256), field(use, "input"))
        if budget <= 0:
            break
    return list(found.values())


def _arguments_digest(arguments: object) -> str | None:
    """The digest of a call's input: of the decoded value when it is the model's JSON string (so the
    same arguments, however spaced, give the same digest), else of the value itself."""
    if not isinstance(arguments, str):
        return digest(arguments) if arguments is not None else None
    if not arguments.strip():
        return digest({})  # Strands reads an empty input as no arguments
    return json_digest(arguments)


def _tokens(events: object) -> int | None:
    """inputTokens + outputTokens of the last `metadata` event of a model's stream events; None when
    there is none or either count is not sane."""
    if not isinstance(events, list):
        return None
    for event in reversed(events[-EVENT_LIMIT:]):
        usage = field(event, "metadata", "usage")
        if isinstance(usage, dict):
            counts = [usage.get("inputTokens"), usage.get("outputTokens")]
            if all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53 for n in counts):
                return counts[0] + counts[1]  # type: ignore[operator]
            return None
    return None


@dataclass(frozen=True)
class ToolCall:
    """What the guarded tool's activity receives first: the tool use the model asked for (the names
    are Strands' own, as its MCP call-tool activity takes them)."""

    tool_use_id: str
    tool_name: str


def tool_call_key(call: ToolCall) -> str:
    """The key of this tool call: workflow id + the model's toolUseId (see the module doc)."""
    return call_key(NAME, getattr(call, "tool_use_id", None))


def guarded_activity_as_tool(fn: Callable[..., Any], **activity_options: Any) -> Any:
    """`activity_as_tool(fn, **activity_options)` for an activity whose first parameter (after any
    `self`) is a `ToolCall`: the model sees the other parameters; the activity gets the call first.
    Returns a Strands `AgentTool` named after the activity."""

    name = activity_name(fn)
    call_param = tool_call_parameter(fn, name, ToolCall)[0].name
    return _tool_class()(fn, activity_options, call_param)


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
            given_use = cast(Any, {**tool_use, "input": arguments})  # Strands' ToolUse, the call added
            async for event in super().stream(given_use, invocation_state, **kwargs):
                yield event

    return GuardedActivityTool


def heartbeat_fix(cls: str) -> str:
    """How a killed worker's attempt of this class fails fast, in Strands' words."""
    if cls == "model":
        return (
            "TemporalAgent(..., heartbeat_timeout=timedelta(seconds=5)): its model activity already "
            "heartbeats, only the timeout is missing"
        )
    return (
        "heartbeat from the tool's activity (activity.heartbeat() about every second) and pass "
        "heartbeat_timeout=timedelta(seconds=5) to activity_as_tool(...)"
    )
