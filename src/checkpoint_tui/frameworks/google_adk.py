"""Google ADK's activities under `temporalio.google_adk` (0.0.1, google-adk 2.13), as history shows them:
- `invoke_model` (and `invoke_model_streaming`, whose input wraps the request in `llm_request`): the
  model; its input is ADK's `LlmRequest`: `model` (the name `TemporalModel` was given), `contents` (the
  conversation: `{"role", "parts"}`, a part a `text`, a `function_call` with `id`, `name`, `args`, or a
  `function_response` with `id`, `name`, `response`) and `config` (`labels.adk_agent_name`, which is
  also the activity's summary); its result is a list of `LlmResponse`s: `content.parts` with the calls
  this request made, `usage_metadata` (`prompt_token_count`, `candidates_token_count`,
  `total_token_count`). Strands' integration schedules the same two types: `recognises` tells ADK's by
  its payloads (a request with `contents`, responses with `content` or `usage_metadata`);
- `<set>-call-tool`: an MCP tool call (`TemporalMcpToolSet`); its input holds `name`, `arguments` and
  `tool_context.function_call_id`; `<set>-list-tools` and `<set>-server-session`: other;
- a tool: an activity named as a call of the model request before it (`activity_as_tool` schedules the
  activity the tool wraps; ADK names the tool after the function), whose input is the model's
  arguments, positionally, plus, where the activity declares `tool_context: ToolContextSnapshot`, a
  `{"state", "function_call_id"}` snapshot in that parameter's place: that id is the one the activity
  was keyed by, so it goes first. Otherwise the call is matched by name, in order, from that request's
  result, else from the next request's contents (the calls new since the one before). A model that
  gives no id leaves one to ADK (`adk-<uuid>`, made in the workflow and stripped from what the next
  request sends): only the snapshot shows it. An activity no call names is other.

Keys for the effects library. The exactly-once key of a Google ADK tool call under `temporalio.google_adk`.

`temporalio.google_adk.workflow.activity_as_tool(fn)` hands an activity that declares a parameter
`tool_context: ToolContextSnapshot` a snapshot of ADK's tool context (hidden from the model, like a
native tool's `tool_context`), whose `function_call_id` is the id of the function call being run:

    @activity.defn
    async def send_email_guarded(to: str, body: str, tool_context: ToolContextSnapshot) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(tool_context))

`tool_call_key(tool_context)` is `google-adk:<workflow id>:<function call id>`. The id is the model's
(made inside the `invoke_model` activity, whose result history keeps) or, when the model gives none,
ADK's `adk-<uuid>` made in the workflow from `workflow.uuid4()` (the plugin installs it), so replay
makes the same one. The snapshot is in the tool activity's input, so:
- an activity retry (a killed worker, a timeout) has the same key (`recovered` or `skipped`);
- a reset to between the model request and the tool call keeps the request's result and so a model's
  id (`skipped`); a reset to before the request runs it again and the model makes a new id (a new
  key: the tool sends again). An id ADK made after the reset point may differ too (a reset reseeds
  the workflow's randomness);
- a continue-as-new starts a new ADK run, whose model requests make new ids (the workflow id stays).
A model that repeats ids makes one key of all its calls. Duck-typed: imports no ADK.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from checkpoint_tui.frameworks.base import BY_PAYLOAD, NO, PYTHON_HEARTBEAT_FIX
from checkpoint_tui.frameworks.keys import call_key
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

NAME = "google-adk"
LANGUAGE = "python"
MODEL_TYPES = frozenset({"invoke_model", "invoke_model_streaming"})
MCP_CALL, MCP_OTHER = "-call-tool", ("-list-tools", "-server-session")
SNAPSHOT_KEYS = frozenset({"state", "function_call_id"})
PART_LIMIT = 20_000  # responses, contents or parts looked at per model request
_RESPONSE_KEYS = frozenset({"content", "usage_metadata", "model_version", "partial", "turn_complete", "error_code"})


@dataclass(frozen=True)
class _Call:
    call_id: str | None  # None: the model gave none (ADK makes one in the workflow)
    name: str | None
    arguments: object


def owns(activity_type: str) -> bool:
    """An activity type ADK's integration makes. Strands' makes the same two: see `recognises`."""
    return activity_type in MODEL_TYPES


def recognises(seen: ActivitySeen) -> int:
    """By the payloads: a model activity whose input is an ADK `LlmRequest` or whose result is a list of
    `LlmResponse`s (a bare type cannot tell ADK's from Strands', which recognises it by type alone)."""
    if type_of(seen) not in MODEL_TYPES:
        return NO
    request = _request(seen)
    if isinstance(request, dict) and isinstance(request.get("contents"), list):
        return BY_PAYLOAD
    result = getattr(seen, "result", None)
    head = result[0] if isinstance(result, list) and result else None
    return BY_PAYLOAD if isinstance(head, dict) and bool(head) and set(head) <= _RESPONSE_KEYS else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    def turn(start: int, end: int, rest: list[int]) -> list[UnitInfo]:
        made = _calls_made(seen, start, end) if rest and start >= 0 else []
        return _tools([seen[i] for i in rest], made)

    return by_turn(seen, MODEL_TYPES, _model, turn, _is_framework, _framework_other)


def _request(seen: object) -> object:
    """The `LlmRequest` of a model activity's input (the streaming one wraps it in `llm_request`)."""
    first = (args_of(seen) or [None])[0]
    wrapped = field(first, "llm_request")
    return wrapped if isinstance(wrapped, dict) else first


def _model(seen: object) -> UnitInfo:
    name = clean(field(_request(seen), "model"))
    tokens = _tokens(getattr(seen, "result", None))
    return UnitInfo("model", name, None, None, summary_of(seen), tokens, f"model · {name}" if name else "model")


def _tools(seen: list[ActivitySeen], made: list[_Call] | None) -> list[UnitInfo]:
    """The activities after one model request: each a tool when it was handed its call, or a call of
    that request names it (by name, in order), or the request's calls are unknown; else other."""
    handed = [_handed(s) for s in seen]
    by_id = {c.call_id: c for c in made or [] if c.call_id is not None}
    by_name: dict[str | None, deque[_Call]] = {}
    taken = {h for h in handed if h is not None}
    for call in made or []:
        if call.call_id is None or call.call_id not in taken:
            by_name.setdefault(call.name, deque()).append(call)
    units = []
    for s, given in zip(seen, handed, strict=True):
        same = by_name.get(type_of(s))
        if given is not None:  # an id ADK made stands for the first call of its name that had none
            made_call = by_id.get(given) or (same.popleft() if same and same[0].call_id is None else None)
            units.append(_tool(s, given, made_call))
        elif same:
            call = same.popleft()
            units.append(_tool(s, call.call_id, call))
        else:
            units.append(other(s) if made is not None else _tool(s, None, None))
    return units


def _tool(seen: object, call_id: str | None, made: _Call | None) -> UnitInfo:
    name = clean(type_of(seen))
    parts = ["tool", name or "?"] + ([f"call {short_id(call_id)}"] if call_id else [])
    # The model's arguments as the request made them, else as the activity got them (without a snapshot)
    args = [a for a in args_of(seen) if _snapshot_id(a) is None]
    args_digest = (digest(made.arguments) if made and made.arguments is not None else None) or digest(args)
    return UnitInfo("tool", name, call_id, args_digest, summary_of(seen), None, " · ".join(parts))


def _is_framework(kind: str) -> bool:
    return kind in MODEL_TYPES or kind.endswith((MCP_CALL, *MCP_OTHER))


def _framework_other(seen: object) -> UnitInfo:
    """An MCP call, listing or session: named by what it is."""
    kind = type_of(seen)
    for suffix in MCP_OTHER:
        if kind.endswith(suffix):
            server = clean(kind[: -len(suffix)], 24) or "server"
            return UnitInfo("other", None, None, None, summary_of(seen), None, f"mcp · {server} · {suffix[1:]}")
    server = clean(kind[: -len(MCP_CALL)], 24) or "server"
    first = (args_of(seen) or [None])[0]
    tool, call_id = clean(field(first, "name")), call_id_of(field(first, "tool_context", "function_call_id"))
    return mcp_unit(seen, server, tool, call_id, field(first, "arguments"))


def _calls_made(seen: list[ActivitySeen], model: int, next_model: int) -> list[_Call] | None:
    """The calls model request `model` made: from its result's responses, else what the next
    request's contents hold that this one's did not (a result that did not decode, e.g. too big);
    None when neither tells."""
    made = _response_calls(getattr(seen[model], "result", None))
    if made is not None or next_model >= len(seen):
        return made
    after = _content_calls(field(_request(seen[next_model]), "contents"))
    if after is None:
        return None
    before = {c.call_id for c in _content_calls(field(_request(seen[model]), "contents")) or []}
    return [c for c in after if c.call_id is None or c.call_id not in before]


def _response_calls(responses: object) -> list[_Call] | None:
    """The function calls of a model's responses, in order, each id once; None if it is not a list.
    A streamed request's partial chunks are read only when no whole response came."""
    if not isinstance(responses, list):
        return None
    whole = [r for r in responses[:PART_LIMIT] if field(r, "partial") is not True]
    return _content_calls([field(r, "content") for r in whole or responses[:PART_LIMIT]])


def _content_calls(contents: object) -> list[_Call] | None:
    """The function_call parts of a list of contents, in order, each id once; None if it is not a
    list. At most PART_LIMIT contents and parts are looked at in all."""
    if not isinstance(contents, list):
        return None
    found: list[_Call] = []
    ids: set[str] = set()
    budget = PART_LIMIT
    for content in contents[:PART_LIMIT]:
        parts = field(content, "parts")
        parts = parts[:budget] if isinstance(parts, list) else []
        budget -= len(parts) + 1
        for part in parts:
            call = field(part, "function_call")
            if not isinstance(call, dict):
                continue
            call_id = call_id_of(call.get("id"))
            if call_id is None or call_id not in ids:
                found.append(_Call(call_id, clean(call.get("name"), 256), call.get("args")))
                ids.add(call_id) if call_id else None
        if budget <= 0:
            break
    return found


def _handed(seen: object) -> str | None:
    """The function call id of the `ToolContextSnapshot` among the activity's arguments, if any."""
    for arg in args_of(seen):
        call_id = _snapshot_id(arg)
        if call_id is not None:
            return call_id
    return None


def _snapshot_id(value: object) -> str | None:
    if not isinstance(value, dict) or "function_call_id" not in value or not set(value) <= SNAPSHOT_KEYS:
        return None
    return call_id_of(value["function_call_id"])


def _tokens(responses: object) -> int | None:
    """The last response's usage: `total_token_count`, else prompt + candidates; None when there is
    none or the counts are not sane."""
    if not isinstance(responses, list):
        return None
    for response in reversed(responses[-PART_LIMIT:]):
        usage = field(response, "usage_metadata")
        if isinstance(usage, dict):
            total = usage.get("total_token_count")
            if _count(total):
                return total
            counts = [usage.get("prompt_token_count"), usage.get("candidates_token_count")]
            return counts[0] + counts[1] if all(_count(n) for n in counts) else None  # type: ignore[operator]
    return None


def _count(n: object) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53


def tool_call_key(tool_context: object) -> str:
    """The key of this tool call: workflow id + the function call id of `tool_context` (a
    `ToolContextSnapshot`, or the id itself as a string; see the module doc). Raises EffectRefused
    outside an activity or without a usable id."""
    call_id = tool_context if isinstance(tool_context, str) else getattr(tool_context, "function_call_id", None)
    return call_key(NAME, call_id)


def heartbeat_fix(cls: str) -> str:
    """How a killed worker's attempt fails fast: the Python SDK's way (the plugin sets no heartbeat)."""
    return PYTHON_HEARTBEAT_FIX
