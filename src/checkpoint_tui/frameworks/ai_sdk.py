"""The Vercel AI SDK in TypeScript under Temporal's plugin (`@temporalio/ai-sdk` 1.23, `ai` 7), as history
shows it:
- `invokeModel` (and `invokeModelStreaming`): the model; its input is `{modelId, options}`, the
  options holding the tools offered (`tools[].name`) and the conversation (`prompt`: messages whose
  `tool-call` parts carry `toolCallId`, `toolName` and `input`); its result holds the calls this
  request made (`content[]`, type `tool-call`, their `input` a JSON string) and `usage`
  (`inputTokens.total`, `outputTokens.total`);
- `invokeEmbeddingModel`: an embedding request, counted with the model's;
- `<server>-callTool` / `-listTools`: MCP;
- any other activity of the run: a tool's (a tool's `execute` runs in the workflow and calls its
  activity through proxyActivities). Its call id is matched from the calls of the model request
  before it, by name (a tool whose activity has its name) and then by order; an activity handed the
  call id in its input (`{toolCallId: ...}`, as examples/ts's guarded send) keeps its own.
"""

from __future__ import annotations

from checkpoint_tui.frameworks.base import BY_TYPE, NO
from checkpoint_tui.frameworks.tool_call import Call, json_digest, match_calls
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

NAME = "ai-sdk"
LANGUAGE = "typescript"
MODEL_TYPES = frozenset({"invokeModel", "invokeModelStreaming", "invokeEmbeddingModel"})
MCP_SUFFIXES = ("-callTool", "-listTools")
PART_LIMIT = 20_000  # content parts looked at per model result


def recognises(seen: ActivitySeen) -> int:
    """By its activity type: the plugin's are camelCase, no Python integration's are."""
    return BY_TYPE if type_of(seen) in MODEL_TYPES else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    def turn(start: int, end: int, tools: list[int]) -> list[UnitInfo]:
        made = _calls(field(getattr(seen[start], "result", None), "content")) if tools and start >= 0 else []
        kinds = [type_of(seen[i]) for i in tools]
        return [_tool(seen[i], call) for i, call in zip(tools, match_calls(kinds, made), strict=True)]

    return by_turn(seen, MODEL_TYPES, _model, turn, _is_mcp, _mcp_or_other)


def _model(seen: object) -> UnitInfo:
    first = (args_of(seen) or [None])[0]
    name = clean(field(first, "modelId"))
    label = f"model · {name}" if name else "model"
    usage = field(getattr(seen, "result", None), "usage")
    return UnitInfo("model", name, None, None, summary_of(seen), _tokens(usage), label)


def _tokens(usage: object) -> int | None:
    """inputTokens.total + outputTokens.total; None when either is missing or not a sane count."""
    counts = [field(usage, "inputTokens", "total"), field(usage, "outputTokens", "total")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53 for n in counts):
        return None
    return counts[0] + counts[1]  # type: ignore[operator]


def _tool(seen: object, call: Call | None) -> UnitInfo:
    name = clean(type_of(seen))
    args = args_of(seen)
    own = call_id_of(field((args or [None])[0], "toolCallId"))  # handed by the workflow: it knows best
    call_id = own or (call.call_id if call else None)
    parts = ["tool", name or "?"] + ([f"call {short_id(call_id)}"] if call_id else [])
    model_digest = json_digest(call.arguments) if call and isinstance(call.arguments, str) and not own else None
    return UnitInfo("tool", name, call_id, model_digest or digest(args), summary_of(seen), None, " · ".join(parts))


def _is_mcp(kind: str) -> bool:
    return kind.endswith(MCP_SUFFIXES)


def _mcp_or_other(seen: object) -> UnitInfo:
    kind = type_of(seen)
    if kind.endswith("-callTool"):
        first = (args_of(seen) or [None])[0]
        server = clean(kind.removesuffix("-callTool"), 24) or "server"
        return mcp_unit(seen, server, clean(field(first, "name")), None, field(first, "args"))
    if kind.endswith("-listTools"):
        server = clean(kind.removesuffix("-listTools"), 24) or "server"
        return UnitInfo("other", None, None, None, summary_of(seen), None, f"mcp · {server} · listTools")
    return other(seen)


def _calls(parts: object) -> list[Call]:
    """The `tool-call` parts of a model result's content, in order, each call id once."""
    if not isinstance(parts, list):
        return []
    found: list[Call] = []
    ids: set[str] = set()
    for part in parts[:PART_LIMIT]:
        if field(part, "type") != "tool-call":
            continue
        call_id = call_id_of(field(part, "toolCallId"))
        if call_id is not None and call_id not in ids:
            ids.add(call_id)
            found.append(Call(call_id, clean(field(part, "toolName"), 256), field(part, "input")))
    return found


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
