"""LangChain Deep Agents under `temporalio.deepagents` as history shows it, classified by
`checkpoint_tui.frameworks.deepagents`: payloads cut down from a real run of
examples/agents/deepagents_mailer, hostile ones, and the example run for real on the session's dev
server: 21 activities for 10 turns, the tool named with the plugin's call id, each line once, a guarded
call keyed by workflow id + that id, and what a reset between a model request and its tool call does
to the key."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_examples import (
    EXAMPLES,
    HUGE,
    ExampleWorker,
    activity_env,
    assert_bounded,
    classify_in_time,
    example_worker,
    expected_lines,
    finished,
    frameworks_imported,
    nested,
    seen,
)
from checkpoint_tui.effects import EffectRefused
from checkpoint_tui.frameworks import ActivitySeen, classify, detect
from checkpoint_tui.frameworks.deepagents import owns, recognises, tool_call_key

WORKER = EXAMPLES / "deepagents_mailer" / "worker.py"
PLAN = '{"turns": 1, "to": "ops@example.com", "pace": 0.1, "think": 0.1}'

# --- payloads as history holds them (a 1-turn run of the example, trimmed) -----------------------------


def lc(kind: str, **kwargs: object) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind], "kwargs": kwargs}


HUMAN = lc("HumanMessage", content=PLAN, type="human", id="a43fd29b")
ARGS = {"to": "ops@example.com", "body": "hello, this is turn 1", "pace": 0.1}
ASKS = lc(
    "AIMessage",
    content="",
    type="ai",
    id="msg_f99fca2d",
    response_metadata={"model_name": "scripted-mailer"},
    tool_calls=[{"name": "send_email", "args": ARGS, "id": "call_e41d7f4f", "type": "tool_call"}],
    usage_metadata={"input_tokens": 41, "output_tokens": 41, "total_tokens": 82},
    invalid_tool_calls=[],
)
MODEL_IN = {
    "model_name": "scripted-mailer",
    "messages": [HUMAN],
    "tool_schemas": [],
    "bind_kwargs": {},
    "config": {},
    "streaming_topic": None,
}
TOOL_IN = {
    "tool_name": "send_email",
    "tool_call_id": "a491eb62d41d4270",
    "args": {**ARGS, "tool_call_id": "call_e41d7f4f"},
    "config": {},
}
SENT = lc(
    "ToolMessage",
    content="sent to ops@example.com (applied)",
    type="tool",
    name="send_email",
    tool_call_id="a491eb62d41d4270",
    status="success",
)


def test_a_turn_is_a_model_request_and_a_tool_call_named_with_the_plugins_call_id() -> None:
    batch = [
        seen("deepagents.invoke_model", [MODEL_IN], {"message": ASKS}, "invoke_model[scripted-mailer]"),
        seen("deepagents.invoke_tool", [TOOL_IN], {"message": SENT}, "tool:send_email"),
    ]
    assert detect(batch) == "deepagents" and all(recognises(s) for s in batch)
    model, tool = classify("deepagents", batch)
    assert (model.cls, model.name, model.tokens, model.label) == (
        "model",
        "scripted-mailer",
        82,
        "model · scripted-mailer",
    )
    assert (tool.cls, tool.name, tool.call_id) == ("tool", "send_email", "a491eb62d41d4270")
    assert tool.label == "tool · send_email · call a491eb…" and tool.args_digest is not None
    # scheduled, not yet answered: the same labels from the input alone; nothing decoded: the summary
    pending = classify(
        "deepagents", [seen("deepagents.invoke_model", [MODEL_IN]), seen("deepagents.invoke_tool", [TOOL_IN])]
    )
    assert [u.label for u in pending] == [model.label, tool.label]
    bare = classify(
        "deepagents",
        [
            seen("deepagents.invoke_model_streaming", [None], None, "invoke_model[m]"),
            seen("deepagents.invoke_tool", [None], None, "tool:t"),
        ],
    )
    assert [(u.cls, u.name, u.call_id) for u in bare] == [("model", "m", None), ("tool", "t", None)]


def test_backend_ops_that_change_the_world_are_tools_reads_are_other() -> None:
    def op(name: str) -> ActivitySeen:
        return seen("deepagents.backend_op", [{"backend_ref": "backend:1", "op": name, "args": ["/a"], "kwargs": {}}])

    units = classify("deepagents", [op("write"), op("aexecute"), op("read"), op("als")])
    assert [(u.cls, u.name) for u in units] == [
        ("tool", "backend:write"),
        ("tool", "backend:aexecute"),
        ("other", "backend:read"),
        ("other", "backend:als"),
    ]
    assert units[0].label == "tool · backend:write" and units[2].label == "backend · read"


def test_langgraph_node_types_and_plain_activities_are_not_deep_agents() -> None:
    for kind in ("mailer.agent", "mailer.tools", "invoke_model", "send_email", "deepagents.other"):
        assert not owns(kind) and not recognises(seen(kind))
    assert classify("deepagents", [seen("payments.charge", [{}])])[0].cls == "other"


def deep(levels: int) -> object:
    return nested(levels, lambda v: {"kwargs": v, "args": [v]})


def bad() -> list[object]:
    """Built when the test runs, not at import: every xdist worker imports every test module, and these
    values are slow to build and hundreds of thousands of objects for every garbage collection after."""
    return [
        None,
        12,
        10**5000,
        float("nan"),
        True,
        HUGE,
        [],
        {},
        deep(100_000),
        {1: "int key"},
        object(),
        {"kwargs": {"usage_metadata": {"input_tokens": 2**60, "output_tokens": -1}, "response_metadata": HUGE}},
        {"kwargs": {"name": "\x1b[31m[bold]red\n" * 1000, "tool_call_id": "\x00" * 10}},
    ]


def hostile() -> list[ActivitySeen]:
    """Each bad value where an input, a field of it, a result and a summary go."""
    batch = []
    for v in bad():
        batch += [
            seen("deepagents.invoke_model", [{"model_name": v, "messages": v}], {"message": v}, v),
            seen("deepagents.invoke_tool", [{"tool_name": v, "tool_call_id": v, "args": v}], {"message": v}, v),
            seen("deepagents.invoke_tool", [v], v, v),
            seen("deepagents.backend_op", [{"op": v, "args": v, "kwargs": v}], v, v),
            seen("deepagents.invoke_model", v, v, v),
            seen(v, [v], v),
        ]
    return batch


def test_hostile_payloads_never_raise_and_stay_bounded() -> None:
    batch = hostile()
    units = classify_in_time("deepagents", batch)  # every list sliced, every walk budgeted
    assert_bounded(units, name_max=64)
    assert not any(owns(k) for k in (None, 7, b"deepagents.invoke_tool"))  # type: ignore[arg-type]


# --- the key --------------------------------------------------------------------------------------------


def test_tool_call_key_names_the_workflow_and_the_call_and_imports_no_framework() -> None:
    env = activity_env("wf-1")
    assert env.run(tool_call_key, "a491eb62") == "deepagents:wf-1:a491eb62"
    assert env.run(tool_call_key, "c" * 600).startswith("deepagents#sha256:")
    for bad in (None, "", 12, {"id": "a491eb62"}):
        with pytest.raises(EffectRefused):
            env.run(tool_call_key, bad)
    with pytest.raises(EffectRefused):  # outside an activity there is no workflow to name
        tool_call_key("a491eb62")
    frameworks = ("deepagents", "langgraph", "langchain_core", "temporalio.deepagents")
    assert frameworks_imported("checkpoint_tui.frameworks.deepagents", frameworks) == "[]"


# --- the example, for real ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(session_root: Path, temporal_address: str) -> Iterator[ExampleWorker]:
    """The example's worker on the session's dev server, for the module; stopped even on failure."""
    yield from example_worker(session_root, temporal_address, WORKER, "deepagents")


async def test_ten_turns_are_21_activities_with_the_tool_named(lab: ExampleWorker) -> None:
    handle = await lab.start("DeepAgentsMailer", {"turns": 10, "pace": 0.02, "think": 0.01})
    result, activities = await finished(handle)
    assert result == "sent 10 emails to ops@example.com"
    assert detect(s.activity_type for s in activities) == "deepagents" and all(recognises(s) for s in activities)
    units = classify("deepagents", activities)
    assert [u.cls for u in units] == ["model", "tool"] * 10 + ["model"]
    models, tools = units[::2], units[1::2]
    assert {u.label for u in models} == {"model · scripted-mailer"}
    assert all(isinstance(u.tokens, int) and u.tokens > 0 for u in models)
    assert {u.name for u in tools} == {"send_email"} and all(
        u.label.startswith("tool · send_email · call ") for u in tools
    )
    assert len({u.call_id for u in tools}) == 10 and len({u.args_digest for u in tools} - {None}) == 10
    assert Counter(lab.lines(handle.id)) == expected_lines(handle.id, 10)


async def test_a_reset_between_the_model_and_the_tool_call(lab: ExampleWorker) -> None:
    """Measured for frameworks/deepagents.py: a guarded run keys each call `deepagents:<workflow>:<the
    plugin's call id>`; a reset to the workflow task after the first model request (the task that
    scheduled the tool call and drew its id from `workflow.uuid4()`) runs on a new random seed: every
    tool call after it gets a new id, a new key, and is `applied` again (the file keeps one copy only
    by the write's own check). Unlike LangGraph's, the key does not survive such a reset."""
    handle = await lab.start("DeepAgentsMailerGuarded", {"turns": 2, "pace": 0.02, "think": 0.01})
    _, activities = await finished(handle)
    old = [u.call_id for u in classify("deepagents", activities) if u.cls == "tool"]
    key = f"key:deepagents:{handle.id}:"
    assert lab.effects(handle.id) == {key + c: "applied" for c in old}
    reason = "test: reset between a model request and its tool call"
    reset = await lab.reset_after_first_model(handle, "deepagents.invoke_model", reason)
    _, again = await finished(reset)
    new = [u.call_id for u in classify("deepagents", again) if u.cls == "tool"]
    outcomes = lab.effects(handle.id)
    assert not set(new) & set(old) and outcomes == {key + c: "applied" for c in old + new}
    assert Counter(lab.lines(handle.id)) == expected_lines(handle.id, 2)
