"""LangGraph under `temporalio.langgraph` as history shows it, classified by
`checkpoint_tui.app.frameworks.langgraph`: payloads cut down from a real run of
examples/agents/langgraph_mailer (one `ActivityInput` / `ActivityOutput` per node activity), hostile
ones, and the example run for real on the session's dev server: 21 activities for 10 turns, the tool
named with its call id, each line once, a guarded call keyed by workflow id + call id, and a reset
between the model node and the tools node that keeps the call's key."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agent_examples import EXAMPLES, Workers, activities_seen, first_model_done_task
from checkpoint_tui.app.frameworks import ActivitySeen, UnitInfo, classify, detect
from checkpoint_tui.app.frameworks.langgraph import owns, recognises
from checkpoint_tui.effects import EffectRefused
from checkpoint_tui.integrations.langgraph import tool_call_key
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import close_all, connect
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync

WORKER = EXAMPLES / "langgraph_mailer" / "worker.py"
RUN_TIMEOUT_S = 30
PLAN = '{"turns": 1, "to": "ops@example.com", "pace": 0.1, "think": 0.1}'

# --- payloads as history holds them (a 1-turn run of the example, trimmed) -----------------------------

HUMAN = {"additional_kwargs": {}, "content": PLAN, "id": "4dd69c15", "name": None, "response_metadata": {},
         "type": "human"}  # fmt: skip
CALL = {"args": {"body": "hello, this is turn 1", "pace": 0.1, "to": "ops@example.com"},
        "id": "call_46d69d5005934e3ba2bf7058", "name": "send_email", "type": "tool_call"}  # fmt: skip
ASKS = {"additional_kwargs": {}, "content": "", "id": "msg_b70dc518", "invalid_tool_calls": [], "name": None,
        "response_metadata": {"model_name": "scripted-mailer"}, "tool_calls": [CALL], "type": "ai",
        "usage_metadata": {"input_tokens": 19, "output_tokens": 41, "total_tokens": 60}}  # fmt: skip
SENT = {"additional_kwargs": {}, "artifact": None, "content": "sent to ops@example.com (applied)", "id": None,
        "name": "send_email", "response_metadata": {}, "status": "success", "tool_call_id": CALL["id"],
        "type": "tool"}  # fmt: skip
ANSWERS = {**ASKS, "content": "sent 1 emails to ops@example.com", "tool_calls": [], "id": "msg_efaf1cd6",
           "usage_metadata": {"input_tokens": 50, "output_tokens": 8, "total_tokens": 58}}  # fmt: skip


def node_in(messages: list, node: str = "agent") -> dict:
    config = {"metadata": {"langgraph_node": node, "langgraph_step": 1}, "recursion_limit": 10, "tags": []}
    return {"args": [{"messages": messages}], "kwargs": {}, "langgraph_config": config}


def node_out(update: object) -> dict:
    return {"langgraph_command": None, "langgraph_interrupts": None, "result": update}


def seen(kind: object, args: object = None, result: object = None, summary: object = None) -> ActivitySeen:
    return ActivitySeen(kind, args if args is not None else [], result, summary)  # type: ignore[arg-type]


ONE_TURN = [
    seen("mailer_guarded.agent", [node_in([HUMAN])], node_out({"messages": [ASKS]})),
    seen("mailer_guarded.tools", [node_in([HUMAN, ASKS], "tools")], node_out({"messages": [SENT]})),
    seen("mailer_guarded.agent", [node_in([HUMAN, ASKS, SENT])], node_out({"messages": [ANSWERS]})),
]


def test_owns_the_node_shape_and_detect_finds_the_graph() -> None:
    for kind in ("mailer.agent", "mailer_guarded.tools", "my.pkg.module.task"):
        assert owns(kind), kind
    for kind in ("send_email", "invoke_model_activity", "agent__a__model_request", "", "a.", ".a", "a.b c",
                 "g.no:de", "g.no|de", "x" * 2000 + ".y"):  # fmt: skip
        assert not owns(kind), kind
    assert detect(["mailer.agent", "mailer.tools"]) == "langgraph"
    assert detect(["agent__my.agent__model_request", "mailer.agent"]) == "pydantic-ai"  # the first type decides


def test_a_turn_is_a_model_request_a_tool_call_and_a_model_request() -> None:
    model, tool, final = classify("langgraph", ONE_TURN)
    assert (model.cls, model.name, model.tokens, model.label) == ("model", "scripted-mailer", 60,
                                                                  "model · mailer_guarded.agent")  # fmt: skip
    assert (tool.cls, tool.name, tool.call_id) == ("tool", "send_email", CALL["id"])
    assert tool.label == "tool · send_email · call 46d69d…" and tool.args_digest and tool.tokens is None
    assert (final.cls, final.tokens, final.label) == ("model", 58, model.label)
    # scheduled, not yet completed (what chaos aims at): the same classes, labels and call
    pending = classify("langgraph", [seen(s.activity_type, s.args) for s in ONE_TURN])
    assert [(u.cls, u.label, u.call_id) for u in pending] == [(u.cls, u.label, u.call_id) for u in (model, tool, final)]
    assert pending[0].name == "mailer_guarded.agent"  # the model names itself only in its answer
    assert all(recognises(s) for s in ONE_TURN)


def test_a_plain_workflows_dotted_activities_are_other() -> None:
    plain = [seen("payments.charge", [{"amount": 3}], {"ok": True}), seen("billing.agent", ["x"]),
             seen("billing.tools", [None], "done"), seen("a.b", [node_in([HUMAN])], {"ok": True})]  # fmt: skip
    assert [u.cls for u in classify("langgraph", plain)] == ["other"] * 4
    assert not any(recognises(s) for s in plain)
    assert classify("langgraph", plain)[0].label == "payments.charge"


def test_several_calls_sent_calls_commands_and_custom_states() -> None:
    calls = [CALL, {**CALL, "id": "call_2", "name": "lookup"}, {**CALL, "id": "call_3"}]
    many = seen("g.tools", [node_in([HUMAN, {**ASKS, "tool_calls": calls}], "tools")])
    (unit,) = classify("langgraph", [many])
    assert unit.call_id == CALL["id"] and unit.label == "tool · send_email · call 46d69d… · +2 calls"
    sent = seen("g.tools", [{"args": [{"__type": "tool_call_with_context", "tool_call": calls[1], "state": {}}],
                             "kwargs": {}, "langgraph_config": {}}])  # fmt: skip
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
    value: object = "bottom"
    for _ in range(levels):
        value = {"messages": [value], "tool_calls": [value]}
    return value


HUGE = "x" * 20_000_000
BAD: list[object] = [
    None, 12, 10**5000, float("nan"), True, HUGE, [], {}, deep(100_000), {1: "int key"}, object(),
    {"type": "ai", "tool_calls": HUGE}, {"type": "ai", "tool_calls": [{"name": HUGE, "id": HUGE, "args": deep(500)}]},
    {"type": "ai", "tool_calls": [{"name": "t", "id": str(i), "args": {}} for i in range(100_000)]},
    {"type": "ai", "tool_calls": [["not", "a", "dict"], {"name": ["x"], "id": 5, "args": {1: 2}}]},
    {"type": "ai", "usage_metadata": {"input_tokens": 2**52, "output_tokens": 2**52}, "response_metadata": HUGE},
    {"type": "ai", "response_metadata": {"model_name": "\x1b[31m[bold]red\n" * 1000}},
    {"type": "tool", "name": HUGE, "tool_call_id": "\x00" * 10},
]  # fmt: skip


def command(messages: object) -> dict:
    return node_out(None) | {"langgraph_command": {"goto": "tools", "update": {"messages": messages}}}


def hostile() -> list[ActivitySeen]:
    """Each bad value where a message, a state, a node's argument list, an update and a payload go."""
    batch = []
    for v in BAD:
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
    started = time.monotonic()
    units = classify("langgraph", batch)
    assert time.monotonic() - started < 10  # every list sliced, every walk budgeted
    assert len(units) == len(batch)
    for u in units:
        assert isinstance(u, UnitInfo) and u.cls in ("model", "tool", "other")
        assert 0 < len(u.label) <= 200 and u.label.isprintable()
        assert u.name is None or (len(u.name) <= 48 and u.name.isprintable())
        assert u.call_id is None or (len(u.call_id) <= 256 and u.call_id.isprintable())
        assert u.tokens is None or 0 <= u.tokens < 2**54
    assert not any(owns(k) for k in (None, 7, b"g.agent"))  # type: ignore[arg-type]
    assert [recognises(s) for s in batch[:3]] == [True, True, True]


# --- the key --------------------------------------------------------------------------------------------


def test_tool_call_key_names_the_workflow_and_the_call_and_imports_no_framework() -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="wf-1")
    assert env.run(tool_call_key, "call_9") == "langgraph:wf-1:call_9"
    assert env.run(tool_call_key, "c" * 600).startswith("langgraph#sha256:")
    for bad in (None, "", 12, {"id": "call_9"}):
        with pytest.raises(EffectRefused):
            env.run(tool_call_key, bad)
    with pytest.raises(EffectRefused):  # outside an activity there is no workflow to name
        tool_call_key("call_9")
    frameworks = ("langgraph", "langchain_core", "temporalio.langgraph")
    probe = f"import sys, checkpoint_tui.integrations.langgraph; print([m for m in {frameworks} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# --- the example, for real ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Lab:
    home: Path
    queue: str
    address: str

    def lines(self, workflow_id: str) -> Counter:
        return Counter((self.home / "example-out" / f"{workflow_id}.txt").read_text().splitlines())

    async def start(self, workflow_type: str, inp: object) -> WorkflowHandle:
        client = await Client.connect(self.address)
        return await client.start_workflow(workflow_type, inp, id=f"{workflow_type}-{uuid.uuid4().hex[:8]}",
                                           task_queue=self.queue)  # fmt: skip


@pytest.fixture(scope="module")
def lab(session_root: Path, temporal_address: str) -> Iterator[Lab]:
    """The example's worker on the session's dev server, for the module; stopped even on failure."""
    home = session_root / "langgraph-home"
    Settings(home=home).ensure_dirs()
    (home / "logs").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_"))}
    env.update(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE="default", CHECKPOINT_HOME=str(home))
    workers = Workers(env, home / "logs")
    queue = f"langgraph-{uuid.uuid4().hex[:6]}"
    try:
        workers.start(WORKER, queue)
        assert wait_until_sync(workers.polling, 60, every=0.1), workers.output()
        yield Lab(home, queue, temporal_address)
    finally:
        workers.stop_all()
        close_all()
    assert all(p.poll() is not None for p in workers.procs)


async def finished(handle: WorkflowHandle) -> tuple[str, list[ActivitySeen]]:
    result = await asyncio.wait_for(handle.result(), RUN_TIMEOUT_S)
    return result, activities_seen(await handle.fetch_history())


def expected(workflow_id: str, turns: int) -> Counter:
    return Counter(f"{workflow_id} ops@example.com hello, this is turn {i}" for i in range(1, turns + 1))


def calls_made(seen_: list[ActivitySeen]) -> list[str]:
    """The call ids the model nodes made, read straight from their results (not by the classifier)."""
    return [c["id"] for s in seen_ if s.activity_type.endswith(".agent")
            for m in s.result["result"]["messages"] for c in m["tool_calls"]]  # fmt: skip


async def test_ten_turns_are_21_node_activities_with_the_tool_named(lab: Lab) -> None:
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
    assert lab.lines(handle.id) == expected(handle.id, 10)


async def test_a_reset_between_the_model_and_the_tools_keeps_the_call_and_its_key(lab: Lab) -> None:
    """Measured for integrations/langgraph.py: a guarded run keys each call `langgraph:<workflow>:<call>`;
    a reset to the workflow task after the first model node keeps its call (the tools node re-runs
    `skipped`) and re-runs the second model node, which makes a new call id (a new key: `applied`;
    the file keeps one copy by the write's own check)."""
    handle = await lab.start("LangGraphMailerGuarded", {"turns": 2, "pace": 0.02, "think": 0.01})
    _, activities = await finished(handle)
    old = calls_made(activities)
    db = connect(Settings(home=lab.home).db_path)
    key = f"key:langgraph:{handle.id}:"
    assert {k: r.outcomes for k, r in queries.effects_by_id(db, handle.id).items()} == {key + c: "applied" for c in old}
    before = await handle.fetch_history()
    client = await Client.connect(lab.address)
    reset = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace="default", workflow_execution=WorkflowExecution(workflow_id=handle.id),
        workflow_task_finish_event_id=first_model_done_task(before, "mailer_guarded.agent"),
        request_id=str(uuid.uuid4()), reason="test: reset between a model node and its tools node",
    ))  # fmt: skip
    _, again = await finished(client.get_workflow_handle(handle.id, run_id=reset.run_id))
    new = [u.call_id for u in classify("langgraph", again) if u.cls == "tool"]
    assert new[0] == old[0] and new[1] != old[1]
    outcomes = {k: r.outcomes for k, r in queries.effects_by_id(db, handle.id).items()}
    assert outcomes == {key + old[0]: "applied,skipped", key + old[1]: "applied", key + new[1]: "applied"}
    assert lab.lines(handle.id) == expected(handle.id, 2)


@pytest.mark.parametrize("inp", [{"turns": 0}, {"to": "two words"}, [1]])
async def test_bad_input_fails_the_workflow_at_once(lab: Lab, inp: object) -> None:
    handle = await lab.start("LangGraphMailer", inp)
    with pytest.raises(WorkflowFailureError) as failure:
        await finished(handle)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "BadInput" and cause.non_retryable
