"""The Vercel AI SDK in TypeScript under Temporal's plugin (`@temporalio/ai-sdk` 1.23, `ai` 7), as history
shows it:
- `invokeModel` (and `invokeModelStreaming`): the model; its input is `{modelId, options}`, the
  options holding the tools offered (`tools[].name`) and the conversation (`prompt`: messages whose
  `tool-call` parts carry `toolCallId`, `toolName` and `input`); its result holds the calls this
  request made (`content[]`, type `tool-call`, their `input` a JSON string) and `usage`
  (`inputTokens.total`, `outputTokens.total`);
- `invokeEmbeddingModel`: an embedding request, counted with the model's (it starts no step);
- `<server>-callTool` (input `{name, input, options: {toolCallId}}`) / `-listTools`: MCP;
- any other activity of the run: a tool's (a tool's `execute` runs in the workflow and calls its
  activity through proxyActivities). An activity handed its call id in its input (`{toolCallId}`, as
  examples/ts's guarded send) has that one; the others are matched to the calls the model request
  before them made and no activity claimed: by name (a tool whose activity has its name), then by
  order only where as many activities as calls are left; otherwise no id (never a neighbour's).
"""

from __future__ import annotations

from checkpoint_tui.frameworks.base import BY_TYPE, NO
from checkpoint_tui.frameworks.tool_call import Call, calls_in, json_digest, match_calls
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
    tokens_of,
    type_of,
)

NAME = "ai-sdk"
LANGUAGE = "typescript"
MODEL_TYPES = frozenset({"invokeModel", "invokeModelStreaming"})  # each starts a step of the agent's loop
EMBEDDING = "invokeEmbeddingModel"
MCP_SUFFIXES = ("-callTool", "-listTools")
PART_LIMIT = 20_000  # content parts looked at per model result


def recognises(seen: ActivitySeen) -> int:
    """By its activity type: the plugin's are camelCase, no Python integration's are."""
    return BY_TYPE if type_of(seen) in MODEL_TYPES or type_of(seen) == EMBEDDING else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    def turn(start: int, end: int, tools: list[int]) -> list[UnitInfo]:
        made = _calls(field(getattr(seen[start], "result", None), "content")) if tools and start >= 0 else []
        own = {i: _own_id(seen[i]) for i in tools}
        claimed = {c for c in own.values() if c} | {_mcp_id(seen[i]) for i in range(start + 1, end)} - {None}
        by_id = {c.call_id: c for c in made}
        rest = [i for i in tools if own[i] is None]
        free = [c for c in made if c.call_id not in claimed]
        matched = dict(zip(rest, match_calls([type_of(seen[i]) for i in rest], free, even_only=True), strict=True))

        def call_of(i: int) -> Call | None:
            mine = own[i]
            return matched[i] if mine is None else by_id.get(mine, Call(mine, None, None))

        return [_tool(seen[i], call_of(i)) for i in tools]

    return by_turn(seen, MODEL_TYPES, _model, turn, _is_own, _own_unit)


def _own_id(seen: object) -> str | None:
    """The call id the workflow handed the activity in its input (`{toolCallId}`)."""
    return call_id_of(field((args_of(seen) or [None])[0], "toolCallId"))


def _mcp_id(seen: object) -> str | None:
    if not type_of(seen).endswith("-callTool"):
        return None
    return call_id_of(field((args_of(seen) or [None])[0], "options", "toolCallId"))


def _model(seen: object) -> UnitInfo:
    first = (args_of(seen) or [None])[0]
    name = clean(field(first, "modelId"))
    label = f"model · {name}" if name else "model"
    usage = field(getattr(seen, "result", None), "usage")
    return UnitInfo(
        "model",
        name,
        None,
        None,
        summary_of(seen),
        tokens_of(usage, ("inputTokens", "total"), ("outputTokens", "total")),
        label,
    )


def _tool(seen: object, call: Call | None) -> UnitInfo:
    name = clean(type_of(seen))
    call_id = call.call_id if call else None
    parts = ["tool", name or "?"] + ([f"call {short_id(call_id)}"] if call_id else [])
    model_digest = json_digest(call.arguments) if call and isinstance(call.arguments, str) else None
    return UnitInfo(
        "tool", name, call_id, model_digest or digest(args_of(seen)), summary_of(seen), None, " · ".join(parts)
    )


def _is_own(kind: str) -> bool:
    """The plugin's activities that are no tool's and start no step: MCP's, and embedding requests."""
    return kind.endswith(MCP_SUFFIXES) or kind == EMBEDDING


def _own_unit(seen: object) -> UnitInfo:
    kind = type_of(seen)
    if kind == EMBEDDING:
        return _model(seen)
    if kind.endswith("-callTool"):
        first = (args_of(seen) or [None])[0]
        server = clean(kind.removesuffix("-callTool"), 24) or "server"
        return mcp_unit(seen, server, clean(field(first, "name")), _mcp_id(seen), field(first, "input"))
    if kind.endswith("-listTools"):
        server = clean(kind.removesuffix("-listTools"), 24) or "server"
        return UnitInfo("other", None, None, None, summary_of(seen), None, f"mcp · {server} · listTools")
    return other(seen)


def _calls(parts: object) -> list[Call]:
    """The `tool-call` parts of a model result's content, in order, each call id once."""
    return calls_in(parts, "tool-call", ("toolCallId", "toolName", "input"), PART_LIMIT)


def heartbeat_fix(cls: str) -> str:
    """How a killed worker's attempt of this class fails fast, in the AI SDK plugin's words (TypeScript)."""
    if cls == "model":
        return (
            "the plugin's invokeModel activity does not heartbeat: heartbeat from an activity interceptor "
            "(Context.current().heartbeat() every 500 ms) with heartbeatTimeout: '2s' in "
            "new TemporalProvider({ languageModel: {...} }), or keep its startToCloseTimeout near your "
            "longest model call"
        )
    return (
        "heartbeat from the tool's activity (heartbeat() of @temporalio/activity about every second) and "
        "pass heartbeatTimeout: '2s'..'10s' to proxyActivities"
    )
