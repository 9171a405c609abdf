"""LangChain Deep Agents under `temporalio.deepagents` (0.0.3, deepagents 0.7, langchain-core 1.8), as
history shows it. The agent's loop (a LangGraph graph) and its built-in tools (`write_todos`, `ls`,
`read_file`, `write_file`, `edit_file`, `glob`, `grep`, `execute`, `task`) run in the workflow, on
in-workflow state: they are no activities. The plugin's four activity types are its own, never a
LangGraph node's `<graph>.<node>` (its nodes are not activities):
- `deepagents.invoke_model` (and `deepagents.invoke_model_streaming`): one model request. Input one
  `ModelActivityInput`: `{"model_name", "messages", "tool_schemas", "bind_kwargs", "config",
  "streaming_topic"}`; result `{"message": <AIMessage>}`, its `kwargs` holding `tool_calls`,
  `usage_metadata` and `response_metadata.model_name`. Summary `invoke_model[<model name>]`;
- `deepagents.invoke_tool`: one call of a tool wrapped by `tool_as_activity`. Input `{"tool_name",
  "tool_call_id", "args", "config"}`: its `tool_call_id` is the plugin's own (`workflow.uuid4().hex`),
  not the model's (`call_...`, which an `InjectedToolCallId` argument carries in `args`); result
  `{"message": <ToolMessage>}` with that id. Summary `tool:<name>`. A tool given by `activity_as_tool`
  is the user's own activity type, not this one;
- `deepagents.backend_op`: one operation of a `TemporalBackend` (a real filesystem, shell or store
  behind the built-in file tools): `{"backend_ref", "op", "args", "kwargs", ...}`. Summary
  `backend:<op>`. An op that changes the world (`write`, `edit`, `execute`, ...) is an effect as much
  as a tool is: classed a tool, named `backend:<op>`; a read is other.
Messages cross in LangChain's `dumpd` form: `{"lc": 1, "type": "constructor", "id": [..., "AIMessage"],
"kwargs": {...}}`.

Keys for the effects library. The exactly-once key of a LangChain Deep Agents tool call under `temporalio.deepagents`.

    @tool
    async def send_email(to: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(tool_call_id))

    SEND_EMAIL = tool_as_activity(send_email, start_to_close_timeout=timedelta(seconds=10))

`tool_call_key(tool_call_id)` is `deepagents:<workflow id>:<tool call id>`. Not LangGraph's key: the
id a tool wrapped by `tool_as_activity` gets through `InjectedToolCallId` is the plugin's own, drawn
in the workflow by `workflow.uuid4()` when it schedules the `deepagents.invoke_tool` activity and
kept in that activity's input (`tool_call_id`); the model's id (`call_...`) rides in the input's
`args` and is overwritten by the injection (measured with temporalio-deepagents 0.0.3). So:
- an activity retry (a killed worker, a timeout) has the same key (`recovered` or `skipped`), and so
  has a replay of the workflow (the same seed draws the same id);
- a workflow reset to any point before the tool call was scheduled, including the workflow task right
  after the model request that asked for it, runs on a new random seed: a new id, a new key, and the
  tool sends again (measured: tests/test_deepagents_classify.py). A write that checks for itself (as
  the example's append does) is the only guard across a reset;
- a continue-as-new (`run_deep_agent`) carries the conversation, not the calls: a call made after it is
  a new call with a new key (read in temporalio-deepagents 0.0.3, not measured).
A tool given by `activity_as_tool` is the user's own activity and receives no call id at all.
Duck-typed on a string: it imports neither Deep Agents nor LangChain. One key per tool call: a tool
with two effects suffixes it.
"""

from __future__ import annotations

from checkpoint_tui.frameworks.base import BY_TYPE, NO, PYTHON_HEARTBEAT_FIX
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

NAME = "deepagents"
LANGUAGE = "python"
MODEL_TYPES = frozenset({"deepagents.invoke_model", "deepagents.invoke_model_streaming"})
TOOL_TYPE = "deepagents.invoke_tool"
BACKEND_TYPE = "deepagents.backend_op"
# Backend ops that change the world (and their async twins): a re-run one is a duplicate effect.
_WRITES = frozenset({"write", "edit", "execute", "upload_files", "delete"})
_WRITES |= frozenset(f"a{op}" for op in _WRITES)


def owns(activity_type: str) -> bool:
    return isinstance(activity_type, str) and (
        activity_type in MODEL_TYPES or activity_type in (TOOL_TYPE, BACKEND_TYPE)
    )


def recognises(seen: ActivitySeen) -> int:
    """By its activity type."""
    return BY_TYPE if owns(type_of(seen)) else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    return [_unit(s) for s in seen]


def _unit(seen: object) -> UnitInfo:
    kind = type_of(seen)
    first = (args_of(seen) or [None])[0]
    result = getattr(seen, "result", None)
    if kind in MODEL_TYPES:
        return _model(seen, first, result)
    if kind == TOOL_TYPE:
        return _tool(seen, first, result)
    if kind == BACKEND_TYPE:
        return _backend(seen, first)
    return other(seen)


def _model(seen: object, first: object, result: object) -> UnitInfo:
    reply = field(result, "message", "kwargs")
    name = clean(field(first, "model_name")) or clean(field(reply, "response_metadata", "model_name"))
    if name is None:  # the summary names the model too: `invoke_model[<name>]`
        summary = summary_of(seen) or ""
        inner = summary.partition("[")[2]
        name = clean(inner[:-1]) if summary.startswith("invoke_model") and inner.endswith("]") else None
    # The label names the model from the input, known from the moment the request is scheduled: a unit
    # keeps its label when its request completes.
    return UnitInfo(
        "model", name, None, None, summary_of(seen), tokens_of(field(reply, "usage_metadata")), f"model · {name or '?'}"
    )


def _tool(seen: object, first: object, result: object) -> UnitInfo:
    reply = field(result, "message", "kwargs")
    name = clean(field(first, "tool_name")) or clean(field(reply, "name"))
    if name is None:
        summary = summary_of(seen) or ""
        name = clean(summary[5:]) if summary.startswith("tool:") else None
    call_id = call_id_of(field(first, "tool_call_id")) or call_id_of(field(reply, "tool_call_id"))
    args = field(first, "args")
    parts = ["tool", name or "?"] + ([f"call {short_id(call_id)}"] if call_id else [])
    return UnitInfo(
        "tool",
        name,
        call_id,
        digest(args) if isinstance(args, dict) else None,
        summary_of(seen),
        None,
        " · ".join(parts),
    )


def _backend(seen: object, first: object) -> UnitInfo:
    op = clean(field(first, "op"))
    if op is None:
        summary = summary_of(seen) or ""
        op = clean(summary[8:]) if summary.startswith("backend:") else None
    name = f"backend:{op}" if op else None
    if op not in _WRITES:
        return UnitInfo("other", name, None, None, summary_of(seen), None, f"backend · {op or '?'}")
    parts = [field(first, "args"), field(first, "kwargs")]
    return UnitInfo("tool", name, None, digest(parts), summary_of(seen), None, f"tool · {name}")


def tool_call_key(tool_call_id: object) -> str:
    """The key of this tool call: workflow id + the plugin's tool call id (see the module doc); raises
    EffectRefused outside an activity or without a usable id."""
    return call_key(NAME, tool_call_id)


def heartbeat_fix(cls: str) -> str:
    """How a killed worker's attempt fails fast: the Python SDK's way (the plugin sets no heartbeat)."""
    return PYTHON_HEARTBEAT_FIX
