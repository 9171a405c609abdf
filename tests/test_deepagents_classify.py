"""LangChain Deep Agents under `temporalio.deepagents` as history shows it, classified by
`checkpoint_tui.app.frameworks.deepagents`: payloads cut down from a real run of
examples/agents/deepagents_mailer, hostile ones, and the example run for real on the session's dev
server: 21 activities for 10 turns, the tool named with the plugin's call id, each line once, a guarded
call keyed by workflow id + that id, and what a reset between a model request and its tool call does
to the key."""

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
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import ActivityEnvironment

from agent_examples import EXAMPLES, Workers, activities_seen, first_model_done_task
from checkpoint_tui.app.frameworks import ActivitySeen, UnitInfo, classify, detect
from checkpoint_tui.app.frameworks.deepagents import owns, recognises
from checkpoint_tui.effects import EffectRefused
from checkpoint_tui.integrations.deepagents import tool_call_key
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import close_all, connect
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync

WORKER = EXAMPLES / "deepagents_mailer" / "worker.py"
RUN_TIMEOUT_S = 30
PLAN = '{"turns": 1, "to": "ops@example.com", "pace": 0.1, "think": 0.1}'

# --- payloads as history holds them (a 1-turn run of the example, trimmed) -----------------------------


def lc(kind: str, **kwargs: object) -> dict:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", kind], "kwargs": kwargs}


HUMAN = lc("HumanMessage", content=PLAN, type="human", id="a43fd29b")
ARGS = {"to": "ops@example.com", "body": "hello, this is turn 1", "pace": 0.1}
ASKS = lc("AIMessage", content="", type="ai", id="msg_f99fca2d", response_metadata={"model_name": "scripted-mailer"},
          tool_calls=[{"name": "send_email", "args": ARGS, "id": "call_e41d7f4f", "type": "tool_call"}],
          usage_metadata={"input_tokens": 41, "output_tokens": 41, "total_tokens": 82},
          invalid_tool_calls=[])  # fmt: skip
MODEL_IN = {"model_name": "scripted-mailer", "messages": [HUMAN], "tool_schemas": [], "bind_kwargs": {}, "config": {},
            "streaming_topic": None}  # fmt: skip
TOOL_IN = {"tool_name": "send_email", "tool_call_id": "a491eb62d41d4270",
           "args": {**ARGS, "tool_call_id": "call_e41d7f4f"}, "config": {}}  # fmt: skip
SENT = lc("ToolMessage", content="sent to ops@example.com (applied)", type="tool", name="send_email",
          tool_call_id="a491eb62d41d4270", status="success")  # fmt: skip


def seen(kind: object, args: object = None, result: object = None, summary: object = None) -> ActivitySeen:
    return ActivitySeen(kind, args if args is not None else [], result, summary)  # type: ignore[arg-type]


def test_a_turn_is_a_model_request_and_a_tool_call_named_with_the_plugins_call_id() -> None:
    batch = [seen("deepagents.invoke_model", [MODEL_IN], {"message": ASKS}, "invoke_model[scripted-mailer]"),
             seen("deepagents.invoke_tool", [TOOL_IN], {"message": SENT}, "tool:send_email")]  # fmt: skip
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
    bare = classify("deepagents", [seen("deepagents.invoke_model_streaming", [None], None, "invoke_model[m]"),
                                   seen("deepagents.invoke_tool", [None], None, "tool:t")])  # fmt: skip
    assert [(u.cls, u.name, u.call_id) for u in bare] == [("model", "m", None), ("tool", "t", None)]


def test_backend_ops_that_change_the_world_are_tools_reads_are_other() -> None:
    def op(name: str) -> ActivitySeen:
        return seen("deepagents.backend_op", [{"backend_ref": "backend:1", "op": name, "args": ["/a"], "kwargs": {}}])

    units = classify("deepagents", [op("write"), op("aexecute"), op("read"), op("als")])
    assert [(u.cls, u.name) for u in units] == [("tool", "backend:write"), ("tool", "backend:aexecute"),
                                                ("other", "backend:read"), ("other", "backend:als")]  # fmt: skip
    assert units[0].label == "tool · backend:write" and units[2].label == "backend · read"


def test_langgraph_node_types_and_plain_activities_are_not_deep_agents() -> None:
    for kind in ("mailer.agent", "mailer.tools", "invoke_model", "send_email", "deepagents.other"):
        assert not owns(kind) and not recognises(seen(kind))
    assert classify("deepagents", [seen("payments.charge", [{}])])[0].cls == "other"


HUGE = "x" * 20_000_000


def deep(levels: int) -> object:
    value: object = "bottom"
    for _ in range(levels):
        value = {"kwargs": value, "args": [value]}
    return value


BAD: list[object] = [
    None, 12, 10**5000, float("nan"), True, HUGE, [], {}, deep(100_000), {1: "int key"}, object(),
    {"kwargs": {"usage_metadata": {"input_tokens": 2**60, "output_tokens": -1}, "response_metadata": HUGE}},
    {"kwargs": {"name": "\x1b[31m[bold]red\n" * 1000, "tool_call_id": "\x00" * 10}},
]  # fmt: skip


def hostile() -> list[ActivitySeen]:
    """Each bad value where an input, a field of it, a result and a summary go."""
    batch = []
    for v in BAD:
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
    started = time.monotonic()
    units = classify("deepagents", batch)
    assert time.monotonic() - started < 10
    assert len(units) == len(batch)
    for u in units:
        assert isinstance(u, UnitInfo) and u.cls in ("model", "tool", "other")
        assert 0 < len(u.label) <= 200 and u.label.isprintable()
        assert u.name is None or (len(u.name) <= 64 and u.name.isprintable())
        assert u.call_id is None or (len(u.call_id) <= 256 and u.call_id.isprintable())
        assert u.tokens is None or 0 <= u.tokens < 2**54
    assert not any(owns(k) for k in (None, 7, b"deepagents.invoke_tool"))  # type: ignore[arg-type]


# --- the key --------------------------------------------------------------------------------------------


def test_tool_call_key_names_the_workflow_and_the_call_and_imports_no_framework() -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="wf-1")
    assert env.run(tool_call_key, "a491eb62") == "deepagents:wf-1:a491eb62"
    assert env.run(tool_call_key, "c" * 600).startswith("deepagents#sha256:")
    for bad in (None, "", 12, {"id": "a491eb62"}):
        with pytest.raises(EffectRefused):
            env.run(tool_call_key, bad)
    with pytest.raises(EffectRefused):  # outside an activity there is no workflow to name
        tool_call_key("a491eb62")
    frameworks = ("deepagents", "langgraph", "langchain_core", "temporalio.deepagents")
    probe = f"import sys, checkpoint_tui.integrations.deepagents; print([m for m in {frameworks} if m in sys.modules])"
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
    home = session_root / "deepagents-home"
    Settings(home=home).ensure_dirs()
    (home / "logs").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHECKPOINT_", "EXAMPLE_"))}
    env.update(TEMPORAL_ADDRESS=temporal_address, TEMPORAL_NAMESPACE="default", CHECKPOINT_HOME=str(home))
    workers = Workers(env, home / "logs")
    queue = f"deepagents-{uuid.uuid4().hex[:6]}"
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


async def test_ten_turns_are_21_activities_with_the_tool_named(lab: Lab) -> None:
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
    assert lab.lines(handle.id) == expected(handle.id, 10)


async def test_a_reset_between_the_model_and_the_tool_call(lab: Lab) -> None:
    """Measured for integrations/deepagents.py: a guarded run keys each call `deepagents:<workflow>:<the
    plugin's call id>`; a reset to the workflow task after the first model request (the task that
    scheduled the tool call and drew its id from `workflow.uuid4()`) runs on a new random seed: every
    tool call after it gets a new id, a new key, and is `applied` again (the file keeps one copy only
    by the write's own check). Unlike LangGraph's, the key does not survive such a reset."""
    handle = await lab.start("DeepAgentsMailerGuarded", {"turns": 2, "pace": 0.02, "think": 0.01})
    _, activities = await finished(handle)
    old = [u.call_id for u in classify("deepagents", activities) if u.cls == "tool"]
    db = connect(Settings(home=lab.home).db_path)
    key = f"key:deepagents:{handle.id}:"
    assert {k: r.outcomes for k, r in queries.effects_by_id(db, handle.id).items()} == {key + c: "applied" for c in old}
    before = await handle.fetch_history()
    client = await Client.connect(lab.address)
    reset = await client.workflow_service.reset_workflow_execution(ResetWorkflowExecutionRequest(
        namespace="default", workflow_execution=WorkflowExecution(workflow_id=handle.id),
        workflow_task_finish_event_id=first_model_done_task(before, "deepagents.invoke_model"),
        request_id=str(uuid.uuid4()), reason="test: reset between a model request and its tool call",
    ))  # fmt: skip
    _, again = await finished(client.get_workflow_handle(handle.id, run_id=reset.run_id))
    new = [u.call_id for u in classify("deepagents", again) if u.cls == "tool"]
    outcomes = {k: r.outcomes for k, r in queries.effects_by_id(db, handle.id).items()}
    assert not set(new) & set(old) and outcomes == {key + c: "applied" for c in old + new}
    assert lab.lines(handle.id) == expected(handle.id, 2)
