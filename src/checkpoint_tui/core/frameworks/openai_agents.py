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
  `checkpoint_tui.integrations.openai_agents.guarded_activity_as_tool` also hands the tool its call
  as the first argument (`{"call_id", "tool_name"}`): used when nothing else matched."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass

from checkpoint_tui.core.frameworks.units import (
    ActivitySeen,
    UnitInfo,
    args_of,
    by_turn,
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

NAME = "openai-agents"
MODEL_TYPES = frozenset({"invoke_model_activity", "invoke_model_activity_streaming"})
MCP_SUFFIXES = ("-call-tool", "-call-tool-v2", "-list-tools", "-list-prompts", "-get-prompt", "-get-prompt-v2")
ITEM_LIMIT = 20_000  # conversation items looked at per model request
ARGUMENTS_LIMIT = 256 * 1024  # characters of a call's arguments decoded for the digest


@dataclass(frozen=True)
class _Call:
    call_id: str
    name: str | None
    arguments: object  # the JSON string the model gave, as found


def owns(activity_type: str) -> bool:
    return activity_type in MODEL_TYPES


def recognises(seen: ActivitySeen) -> bool:
    """Its activity type is enough (the payloads add nothing a type does not say)."""
    return owns(type_of(seen))


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    def turn(start: int, end: int, tools: list[int]) -> list[UnitInfo]:
        made = _calls_made(seen, start, end) if tools and start >= 0 else []
        return [
            _tool(seen[i], call) for i, call in zip(tools, _match([type_of(seen[i]) for i in tools], made), strict=True)
        ]

    return by_turn(seen, MODEL_TYPES, _model, turn, _is_mcp, _mcp_or_other)


def _model(seen: object) -> UnitInfo:
    first = (args_of(seen) or [None])[0]
    name = clean(field(first, "model_name"))
    label = f"model · {name}" if name else "model"
    result = getattr(seen, "result", None)
    return UnitInfo("model", name, None, None, summary_of(seen), tokens_of(field(result, "usage")), label)


def _tool(seen: object, call: _Call | None) -> UnitInfo:
    name = clean(type_of(seen))
    handed = _handed(seen)
    call = call or handed
    parts = ["tool", name or "?"] + ([f"call {short_id(call.call_id)}"] if call else [])
    args = args_of(seen)  # the model's arguments as the activity got them, without a handed call
    args_digest = (_arguments_digest(call.arguments) if call else None) or digest(args[1:] if handed else args)
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


def _calls_made(seen: list[ActivitySeen], model: int, next_model: int) -> list[_Call]:
    """The calls model request `model` made: its result's output, else what the next request's input
    holds that this one's did not (a result that did not decode, e.g. too big)."""
    made = _calls(field(getattr(seen[model], "result", None), "output"))
    if made or next_model >= len(seen):
        return made
    before = {c.call_id for c in _calls(field((args_of(seen[model]) or [None])[0], "input"))}
    after = _calls(field((args_of(seen[next_model]) or [None])[0], "input"))
    return [c for c in after if c.call_id not in before]


def _calls(items: object) -> list[_Call]:
    """The `function_call` items of a list of conversation items, in order, each call id once."""
    if not isinstance(items, list):
        return []
    found: list[_Call] = []
    ids: set[str] = set()
    for item in items[:ITEM_LIMIT]:
        if field(item, "type") != "function_call":
            continue
        call_id = call_id_of(field(item, "call_id"))
        if call_id is not None and call_id not in ids:
            ids.add(call_id)
            found.append(_Call(call_id, clean(field(item, "name"), 256), field(item, "arguments")))
    return found


def _match(kinds: list[str], calls: list[_Call]) -> list[_Call | None]:
    """Tool activities to calls: first each to the next unused call of its own name (activity_as_tool
    names the tool after the activity), then the rest to the unused calls in order."""
    by_name: dict[str | None, deque[int]] = {}
    for j, call in enumerate(calls):
        by_name.setdefault(call.name, deque()).append(j)
    matched: list[_Call | None] = [None] * len(kinds)
    used: set[int] = set()
    for i, kind in enumerate(kinds):
        same = by_name.get(kind)
        if same:
            j = same.popleft()
            matched[i] = calls[j]
            used.add(j)
    rest = iter(j for j in range(len(calls)) if j not in used)
    for i in range(len(kinds)):
        if matched[i] is None:
            j = next(rest, None)
            if j is None:
                break
            matched[i] = calls[j]
    return matched


def _handed(seen: object) -> _Call | None:
    """The call `guarded_activity_as_tool` hands its activity first: `{"call_id", "tool_name"}`."""
    first = (args_of(seen) or [None])[0]
    if not isinstance(first, dict) or set(first) != {"call_id", "tool_name"}:
        return None
    call_id = call_id_of(first["call_id"])
    return _Call(call_id, clean(first["tool_name"], 256), None) if call_id else None


def _arguments_digest(arguments: object) -> str | None:
    """The digest of a call's arguments (a JSON string): of the decoded value, so that the same
    arguments written with other spacing or key order give the same digest."""
    if not isinstance(arguments, str) or len(arguments) > ARGUMENTS_LIMIT:
        return None
    try:
        return digest(json.loads(arguments))
    except (ValueError, RecursionError):  # not JSON, too deep, an integer of > 4300 digits
        return None
