"""LangGraph's activities under `temporalio.langgraph` (0.1, langgraph 1.2), as history shows them:
- every node declared `execute_in: activity` is an activity typed `<graph>.<node>` (`mailer.agent`,
  `mailer.tools`; a Functional API task: `<module>.<qualname>`): the type names the node, never the
  tool. Its input is one `ActivityInput`: `{"args": [<the node's state>], "kwargs", "langgraph_config"}`
  (`langgraph_config.metadata.langgraph_node` names the node again); its result one `ActivityOutput`:
  `{"result": <the node's update>, "langgraph_command", "langgraph_interrupts"}`. Messages cross as
  dicts with `type` "human" / "ai" / "tool" / "system";
- a model node returns an `ai` message: its `tool_calls` (`name`, `id`, `args`), `usage_metadata`
  (`input_tokens` / `output_tokens`) and `response_metadata.model_name`; its input is the conversation;
- a tools node gets the conversation whose last message is the `ai` message with the calls to run,
  and returns one `tool` message per call (`name`, `tool_call_id`). A node sent one call (the prebuilt
  ToolNode under the Send API: `{"tool_call": {...}, "state": ...}`, read, not measured) runs that one.

The type alone cannot tell a LangGraph node from a plain workflow's dotted activity type
(`payments.charge`): `owns` accepts the shape, `recognises` also looks at the input, and `classify`
calls an activity whose decoded payloads are not LangGraph's "other".

Keys for the effects library. The exactly-once key of a LangGraph tool call under `temporalio.langgraph`.

    @tool("send_email")
    async def send_email(to: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(tool_call_id))

`tool_call_key(tool_call_id)` is `langgraph:<workflow id>:<tool call id>`. The tool runs inside the
node that executes tool calls (an activity, `<graph>.tools`), whose input is the graph's state: the
call id is the one the model node's activity made and history keeps in its result, so:
- an activity retry of the tools node (a killed worker, a timeout) has the same key (`recovered` or
  `skipped`); a tools node that runs several calls re-runs them all, those done skipped by their keys;
- a workflow reset to between the model node and the tools node keeps the call id (skipped); a reset
  to before the model node runs it again and the model makes a new call id (a new key: it sends
  again). Both measured (tests/test_langgraph_classify.py);
- a continue-as-new keeps the workflow id; a node the plugin's task cache carries over
  (`temporalio.langgraph.graph(name, cache=cache())`, keyed by the node and its input) is not run
  again, so its calls keep their ids and keys; a graph that starts over makes new calls, new keys
  (read in temporalio-langgraph 0.1.0, not measured).
Duck-typed on a string: it imports neither LangGraph nor LangChain. One key per tool call: a tool with
two effects suffixes it.
"""

from __future__ import annotations

from checkpoint_tui.frameworks.base import BY_SHAPE, NO
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

NAME = "langgraph"
LANGUAGE = "python"
_INPUT_KEYS = frozenset({"args", "kwargs", "langgraph_config"})
_OUTPUT_KEYS = frozenset({"result", "langgraph_command", "langgraph_interrupts"})
_MESSAGE_TYPES = frozenset({"human", "ai", "tool", "system", "function", "remove", "AIMessageChunk"})
_AI_TYPES = frozenset({"ai", "AIMessageChunk"})
STATE_KEYS = 64  # keys of a state looked at for its list of messages
UPDATE_MESSAGES = 64  # messages of a node's update looked at
CALLS = 256  # tool calls of one AI message counted
# Node names of LangGraph's prebuilt agents (create_react_agent, langchain's create_agent): used only
# when neither payload decoded (e.g. a state bigger than the history reader decodes).
_MODEL_NODES = frozenset({"agent", "model", "call_model"})
_TOOL_NODES = frozenset({"tools"})


def owns(activity_type: str) -> bool:
    """An activity type of LangGraph's shape, `<graph>.<node>`. Only a shape: a plain workflow's
    dotted type has it too (see `recognises`)."""
    return isinstance(activity_type, str) and len(activity_type) <= 1000 and _node(activity_type) is not None


def recognises(seen: object) -> int:
    """An activity LangGraph's plugin scheduled: its type has the shape, and its input and result, each
    where it decoded, have the plugin's shapes. With neither payload (a type alone), only a prebuilt
    node's name (`<graph>.agent`, `<graph>.tools`...) is taken for LangGraph's: `payments.charge` is not."""
    first = (args_of(seen) or [None])[0]
    result = getattr(seen, "result", None)
    node = _node(type_of(seen))
    if node is None or _foreign(first, result):
        return NO
    known = first is not None or result is not None or node in _MODEL_NODES | _TOOL_NODES
    return BY_SHAPE if known else NO  # a shape: a type only another integration makes outranks it


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    return [_unit(s) for s in seen]


def _unit(seen: object) -> UnitInfo:
    kind = type_of(seen)
    node = _node(kind)
    first = (args_of(seen) or [None])[0]
    result = getattr(seen, "result", None)
    if node is None or _foreign(first, result):
        return other(seen)
    node_arg = _node_arg(first)
    update = _update_messages(result)
    if any(_type(m) in _AI_TYPES for m in update):
        return _model(seen, kind, update)
    calls, answered = _calls(node_arg), any(_type(m) == "tool" for m in update)
    # A tools node answered with tool messages, or is running with calls to run. One that completed
    # without a tool message ran no tool (an approval step, a router): it is not a tool call.
    if answered or (calls and result is None):
        return _tool(seen, calls, update)
    if result is None and _last_message(node_arg) is not None:
        return _model(seen, kind, [])  # pending with the conversation in: the model is being asked
    if first is None and result is None:  # neither payload decoded: the prebuilt agents' node names
        if node in _MODEL_NODES:
            return _model(seen, kind, [])
        if node in _TOOL_NODES:
            return _tool(seen, [], [])
    return other(seen)


def _node(kind: str) -> str | None:
    """The node of a `<graph>.<node>` type, else None. LangGraph refuses ':' and '|' in a node name; a
    graph name is any key the plugin was given (dots too: the node is after the last one). Linear."""
    graph, dot, node = kind.rpartition(".")
    if not (dot and graph and node) or ":" in node or "|" in node or any(c.isspace() for c in kind):
        return None
    return node


def _foreign(first: object, result: object) -> bool:
    """Payloads that decoded and are not the plugin's: a plain workflow's dotted activity type."""
    return (first is not None and not _shaped(first, _INPUT_KEYS)) or (
        result is not None and not _shaped(result, _OUTPUT_KEYS)
    )


def _node_arg(first: object) -> object:
    """The node's first argument (its state, or the call it was sent) in an `ActivityInput`."""
    args = field(first, "args")
    return args[0] if isinstance(args, list) and args else None


def _model(seen: object, kind: str, update: list[dict]) -> UnitInfo:
    replies = [m for m in update if _type(m) in _AI_TYPES]
    meta = [field(m, "response_metadata") for m in replies]
    name = next((n for n in (clean(field(x, "model_name")) or clean(field(x, "model")) for x in meta) if n), None)
    counts = [n for n in (tokens_of(field(m, "usage_metadata")) for m in replies) if n is not None]
    tokens = sum(counts) if counts and sum(counts) < 2**53 else None
    # The label names the node, known from the moment it is scheduled (the model's name only once it
    # answered): a unit keeps its label when its request completes.
    return UnitInfo("model", name or clean(kind), None, None, summary_of(seen), tokens, f"model · {clean(kind) or '?'}")


def _tool(seen: object, calls: list[dict], update: list[dict]) -> UnitInfo:
    """One activity runs every call of the model's message, so one unit stands for them all: the first
    call it was given names it (its name, id and arguments), the others are counted in the label. With
    its input undecoded, the first tool message it returned names it (no arguments)."""
    done = [m for m in update if _type(m) == "tool"]
    first = calls[0] if calls else done[0] if done else None
    name = clean(field(first, "name"))
    call_id = call_id_of(field(first, "id" if calls else "tool_call_id"))
    args = field(first, "args") if calls else None
    parts = ["tool", name or "?"] + ([f"call {short_id(call_id)}"] if call_id else [])
    more = max(len(calls), len(done)) - 1
    if more > 0:
        parts.append(f"+{more} call{'s' if more > 1 else ''}")
    return UnitInfo(
        "tool", name, call_id, digest(args) if args is not None else None, summary_of(seen), None, " · ".join(parts)
    )


def _shaped(value: object, keys: frozenset[str]) -> bool:
    return isinstance(value, dict) and keys <= value.keys()


def _type(message: object) -> str | None:
    kind = field(message, "type")
    return kind if isinstance(kind, str) and kind in _MESSAGE_TYPES else None


def _messages(state: object) -> list:
    """The state's list of messages: its `messages` key, else the first list of messages among its
    first STATE_KEYS values (a state of the user's own shape)."""
    if not isinstance(state, dict):
        return []
    found = state.get("messages")
    if isinstance(found, list):
        return found
    for _, value in zip(range(STATE_KEYS), state.values(), strict=False):
        if isinstance(value, list) and value and _type(value[-1]) is not None:
            return value
    return []


def _last_message(state: object) -> dict | None:
    messages = _messages(state)
    last = messages[-1] if messages else None
    return last if _type(last) is not None else None


def _calls(node_arg: object) -> list[dict]:
    """The tool calls a node was given: one sent alone (`{"tool_call": {...}}`), else those of the last
    message of its state when that is the model's."""
    sent = field(node_arg, "tool_call")
    if isinstance(sent, dict):
        return [sent]
    last = _last_message(node_arg)
    calls = field(last, "tool_calls") if _type(last) in _AI_TYPES else None
    return [c for c in calls[:CALLS] if isinstance(c, dict)] if isinstance(calls, list) else []


def _update_messages(result: object) -> list[dict]:
    """The messages of a node's update, from its result or its Command's `update`; at most UPDATE_MESSAGES."""
    for update in (field(result, "result"), field(result, "langgraph_command", "update")):
        messages = field(update, "messages")
        if isinstance(messages, dict):  # one message, not a list
            messages = [messages]
        if isinstance(messages, list):
            return [m for m in messages[:UPDATE_MESSAGES] if _type(m) is not None]
    return []


def tool_call_key(tool_call_id: object) -> str:
    """The key of this tool call: workflow id + the model's tool call id (see the module doc); raises
    EffectRefused outside an activity or without a usable id."""
    return call_key(NAME, tool_call_id)


def heartbeat_fix(cls: str) -> str:
    """How a killed worker's attempt fails fast, in LangGraph's words (a node is the activity)."""
    return (
        "heartbeat from the node (activity.heartbeat() about every second) and put "
        "heartbeat_timeout=timedelta(seconds=5) in the node's metadata, beside execute_in='activity'"
    )
