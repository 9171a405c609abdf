"""LangGraph under `temporalio.langgraph` as history shows it, classified by
`checkpoint_tui.frameworks.langgraph`: payloads cut down from a real run of
examples/agents/langgraph_mailer (one `ActivityInput` / `ActivityOutput` per node activity), hostile
ones, and the example run for real on the session's dev server: 21 activities for 10 turns, the tool
named with its call id, each line once, a guarded call keyed by workflow id + call id, and a reset
between the model node and the tools node that keeps the call's key."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

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
from checkpoint_tui.frameworks.langgraph import owns, recognises, tool_call_key

WORKER = EXAMPLES / "langgraph_mailer" / "worker.py"
PLAN = '{"turns": 1, "to": "ops@example.com", "pace": 0.1, "think": 0.1}'

# --- payloads as history holds them (a 1-turn run of the example, trimmed) -----------------------------

HUMAN = {
    "additional_kwargs": {},
    "content": PLAN,
    "id": "4dd69c15",
    "name": None,
    "response_metadata": {},
    "type": "human",
}
CALL = {
    "args": {"body": "hello, this is turn 1", "pace": 0.1, "to": "ops@example.com"},
    "id": "call_46d69d5005934e3ba2bf7058",
    "name": "send_email",
    "type": "tool_call",
}
ASKS = {
    "additional_kwargs": {},
    "content": "",
    "id": "msg_b70dc518",
    "invalid_tool_calls": [],
    "name": None,
    "response_metadata": {"model_name": "scripted-mailer"},
    "tool_calls": [CALL],
    "type": "ai",
    "usage_metadata": {"input_tokens": 19, "output_tokens": 41, "total_tokens": 60},
}
SENT = {
    "additional_kwargs": {},
    "artifact": None,
    "content": "sent to ops@example.com (applied)",
    "id": None,
    "name": "send_email",
    "response_metadata": {},
    "status": "success",
    "tool_call_id": CALL["id"],
    "type": "tool",
}
ANSWERS = {
    **ASKS,
    "content": "sent 1 emails to ops@example.com",
    "tool_calls": [],
    "id": "msg_efaf1cd6",
    "usage_metadata": {"input_tokens": 50, "output_tokens": 8, "total_tokens": 58},
}


def node_in(messages: list, node: str = "agent") -> dict:
    config = {"metadata": {"langgraph_node": node, "langgraph_step": 1}, "recursion_limit": 10, "tags": []}
    return {"args": [{"messages": messages}], "kwargs": {}, "langgraph_config": config}


def node_out(update: object) -> dict:
    return {"langgraph_command": None, "langgraph_interrupts": None, "result": update}


ONE_TURN = [
    seen("mailer_guarded.agent", [node_in([HUMAN])], node_out({"messages": [ASKS]})),
    seen("mailer_guarded.tools", [node_in([HUMAN, ASKS], "tools")], node_out({"messages": [SENT]})),
    seen("mailer_guarded.agent", [node_in([HUMAN, ASKS, SENT])], node_out({"messages": [ANSWERS]})),
]


def test_owns_the_node_shape_and_detect_finds_the_graph() -> None:
    for kind in ("mailer.agent", "mailer_guarded.tools", "my.pkg.module.task"):
        assert owns(kind), kind
    for kind in (
        "send_email",
        "invoke_model_activity",
        "agent__a__model_request",
        "",
        "a.",
        ".a",
        "a.b c",
        "g.no:de",
        "g.no|de",
        "x" * 2000 + ".y",
    ):
        assert not owns(kind), kind
    assert detect(["mailer.agent", "mailer.tools"]) == "langgraph"
    assert detect(["agent__my.agent__model_request", "mailer.agent"]) == "pydantic-ai"  # the first type decides


def test_a_turn_is_a_model_request_a_tool_call_and_a_model_request() -> None:
    model, tool, final = classify("langgraph", ONE_TURN)
    assert (model.cls, model.name, model.tokens, model.label) == (
        "model",
        "scripted-mailer",
        60,
        "model · mailer_guarded.agent",
    )
    assert (tool.cls, tool.name, tool.call_id) == ("tool", "send_email", CALL["id"])
    assert tool.label == "tool · send_email · call 46d69d…" and tool.args_digest and tool.tokens is None
    assert (final.cls, final.tokens, final.label) == ("model", 58, model.label)
    # scheduled, not yet completed (what chaos aims at): the same classes, labels and call
    pending = classify("langgraph", [seen(s.activity_type, s.args) for s in ONE_TURN])
    assert [(u.cls, u.label, u.call_id) for u in pending] == [(u.cls, u.label, u.call_id) for u in (model, tool, final)]
    assert pending[0].name == "mailer_guarded.agent"  # the model names itself only in its answer
    assert all(recognises(s) for s in ONE_TURN)


def test_a_plain_workflows_dotted_activities_are_other() -> None:
    plain = [
        seen("payments.charge", [{"amount": 3}], {"ok": True}),
        seen("billing.agent", ["x"]),
        seen("billing.tools", [None], "done"),
        seen("a.b", [node_in([HUMAN])], {"ok": True}),
    ]
    assert [u.cls for u in classify("langgraph", plain)] == ["other"] * 4
    assert not any(recognises(s) for s in plain)
    assert classify("langgraph", plain)[0].label == "payments.charge"


def test_several_calls_sent_calls_commands_and_custom_states() -> None:
    calls = [CALL, {**CALL, "id": "call_2", "name": "lookup"}, {**CALL, "id": "call_3"}]
    many = seen("g.tools", [node_in([HUMAN, {**ASKS, "tool_calls": calls}], "tools")])
    (unit,) = classify("langgraph", [many])
    assert unit.call_id == CALL["id"] and unit.label == "tool · send_email · call 46d69d… · +2 calls"
    sent = seen(
        "g.tools",
        [
            {
                "args": [{"__type": "tool_call_with_context", "tool_call": calls[1], "state": {}}],
                "kwargs": {},
                "langgraph_config": {},
            }
        ],
    )
    assert classify("langgraph", [sent])[0].label == "tool · lookup · call 2"
    assert classify("langgraph", [seen("g.agent", [node_in([HUMAN])], command([ASKS]))])[0].tokens == 60
    custom = {"args": [{"chat": [HUMAN, ASKS], "turn": 1}], "kwargs": {}, "langgraph_config": {}}
    assert classify("langgraph", [seen("g.act", [custom])])[0].name == "send_email"  # its own state key
    # a completed node whose update holds no message ran neither the model nor a tool
    router = seen("g.decide", [node_in([HUMAN, ASKS])], node_out({"intent": "mail"}))
    assert classify("langgraph", [router])[0].cls == "other"


def test_payloads_that_did_not_decode() -> None:
    # the input too big for the history reader: the result still tells the tool (no arguments) ...
    (tool,) = classify("langgraph", [seen("g.tools", [None], node_out({"messages": [SENT, SENT]}))])
    assert (tool.name, tool.call_id, tool.args_digest) == ("send_email", CALL["id"], None)
    assert tool.label.endswith("· +1 call")
    # ... and with neither payload, the prebuilt agents' node names
    units = classify("langgraph", [seen("g.agent", [None]), seen("g.tools", [None]), seen("g.summarize", [None])])
    assert [u.cls for u in units] == ["model", "tool", "other"] and units[1].label == "tool · ?"


def deep(levels: int) -> object:
    return nested(levels, lambda v: {"messages": [v], "tool_calls": [v]})


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
        {"type": "ai", "tool_calls": HUGE},
        {"type": "ai", "tool_calls": [{"name": HUGE, "id": HUGE, "args": deep(500)}]},
        {"type": "ai", "tool_calls": [{"name": "t", "id": str(i), "args": {}} for i in range(100_000)]},
        {"type": "ai", "tool_calls": [["not", "a", "dict"], {"name": ["x"], "id": 5, "args": {1: 2}}]},
        {"type": "ai", "usage_metadata": {"input_tokens": 2**52, "output_tokens": 2**52}, "response_metadata": HUGE},
        {"type": "ai", "response_metadata": {"model_name": "\x1b[31m[bold]red\n" * 1000}},
        {"type": "tool", "name": HUGE, "tool_call_id": "\x00" * 10},
    ]


def command(messages: object) -> dict:
    return node_out(None) | {"langgraph_command": {"goto": "tools", "update": {"messages": messages}}}


def hostile() -> list[ActivitySeen]:
    """Each bad value where a message, a state, a node's argument list, an update and a payload go."""
    batch = []
    for v in bad():
        batch += [
            seen("g.agent", [node_in([HUMAN, v])], node_out({"messages": [v] * 100})),
            seen("g.tools", [{"args": [{"messages": v}], "kwargs": v, "langgraph_config": v}], node_out(v)),
            seen("g.tools", [{"args": v, "kwargs": {}, "langgraph_config": {}}], v),
            seen("g.x", [{"args": [{"tool_call": v}], "kwargs": {}, "langgraph_config": {}}], command(v)),
            seen("g.agent", [node_in([v] * 1000)], node_out({"messages": [ASKS, v] * 10_000})),
            seen("g.tools", v, v, v),
            seen(v, [v], v),
            seen("." * 10**6, [v]),
        ]
    return batch


def test_hostile_payloads_never_raise_and_stay_bounded() -> None:
    batch = hostile()
    units = classify_in_time("langgraph", batch)  # every list sliced, every walk budgeted
    assert_bounded(units, name_max=48)
    assert not any(owns(k) for k in (None, 7, b"g.agent"))  # type: ignore[arg-type]
    assert [recognises(s) for s in batch[:3]] == [True, True, True]


# --- the key --------------------------------------------------------------------------------------------


def test_tool_call_key_names_the_workflow_and_the_call_and_imports_no_framework() -> None:
    env = activity_env("wf-1")
    assert env.run(tool_call_key, "call_9") == "langgraph:wf-1:call_9"
    assert env.run(tool_call_key, "c" * 600).startswith("langgraph#sha256:")
    for bad in (None, "", 12, {"id": "call_9"}):
        with pytest.raises(EffectRefused):
            env.run(tool_call_key, bad)
    with pytest.raises(EffectRefused):  # outside an activity there is no workflow to name
        tool_call_key("call_9")
    frameworks = ("langgraph", "langchain_core", "temporalio.langgraph")
    assert frameworks_imported("checkpoint_tui.frameworks.langgraph", frameworks) == "[]"


# --- the example, for real ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lab(session_root: Path, temporal_address: str) -> Iterator[ExampleWorker]:
    """The example's worker on the session's dev server, for the module; stopped even on failure."""
    yield from example_worker(session_root, temporal_address, WORKER, "langgraph")


def calls_made(seen_: list[ActivitySeen]) -> list[str]:
    """The call ids the model nodes made, read straight from their results (not by the classifier)."""
    return [
        c["id"]
        for s in seen_
        if s.activity_type.endswith(".agent")
        for m in s.result["result"]["messages"]
        for c in m["tool_calls"]
    ]


async def test_ten_turns_are_21_node_activities_with_the_tool_named(lab: ExampleWorker) -> None:
    handle = await lab.start("LangGraphMailer", {"turns": 10, "pace": 0.02, "think": 0.01})
    result, activities = await finished(handle)
    assert result == "sent 10 emails to ops@example.com"
    assert detect(s.activity_type for s in activities) == "langgraph" and all(recognises(s) for s in activities)
    units = classify("langgraph", activities)
    assert [u.cls for u in units] == ["model", "tool"] * 10 + ["model"]
    models, tools = units[::2], units[1::2]
    assert {u.label for u in models} == {"model · mailer.agent"} and {u.name for u in models} == {"scripted-mailer"}
    assert all(isinstance(u.tokens, int) and u.tokens > 0 for u in models)
    assert {u.name for u in tools} == {"send_email"}
    assert all(u.label.startswith("tool · send_email · call ") for u in tools)
    assert [u.call_id for u in tools] == calls_made(activities) and len({u.call_id for u in tools}) == 10
    assert len({u.args_digest for u in tools} - {None}) == 10
    assert Counter(lab.lines(handle.id)) == expected_lines(handle.id, 10)


async def test_a_reset_between_the_model_and_the_tools_keeps_the_call_and_its_key(lab: ExampleWorker) -> None:
    """Measured for frameworks/langgraph.py: a guarded run keys each call `langgraph:<workflow>:<call>`;
    a reset to the workflow task after the first model node keeps its call (the tools node re-runs
    `skipped`) and re-runs the second model node, which makes a new call id (a new key: `applied`;
    the file keeps one copy by the write's own check)."""
    handle = await lab.start("LangGraphMailerGuarded", {"turns": 2, "pace": 0.02, "think": 0.01})
    _, activities = await finished(handle)
    old = calls_made(activities)
    key = f"key:langgraph:{handle.id}:"
    assert lab.effects(handle.id) == {key + c: "applied" for c in old}
    reason = "test: reset between a model node and its tools node"
    reset = await lab.reset_after_first_model(handle, "mailer_guarded.agent", reason)
    _, again = await finished(reset)
    new = [u.call_id for u in classify("langgraph", again) if u.cls == "tool"]
    assert new[0] == old[0] and new[1] != old[1]
    outcomes = lab.effects(handle.id)
    assert outcomes == {key + old[0]: "applied,skipped", key + old[1]: "applied", key + new[1]: "applied"}
    assert Counter(lab.lines(handle.id)) == expected_lines(handle.id, 2)


@pytest.mark.parametrize("inp", [{"turns": 0}, {"to": "two words"}, [1]])
async def test_bad_input_fails_the_workflow_at_once(lab: ExampleWorker, inp: object) -> None:
    handle = await lab.start("LangGraphMailer", inp)
    with pytest.raises(WorkflowFailureError) as failure:
        await finished(handle)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "BadInput" and cause.non_retryable
