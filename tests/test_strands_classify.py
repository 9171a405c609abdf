"""Strands on Temporal, piece by piece: the exactly-once key of a tool call
(`checkpoint_tui.frameworks.strands`) and the guarded tool that hands its activity the call; the
classifier (`checkpoint_tui.frameworks.strands`) on payloads as history holds them (taken from a
run of examples/agents/strands_mailer, cut small) and on hostile ones. The example itself, run for
real and under the lab: tests/test_strands_lab.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
from temporalio import activity

from agent_examples import HUGE, activity_env, assert_bounded, classify_in_time, nested, seen
from checkpoint_tui.effects import EffectRefused
from checkpoint_tui.frameworks import ActivitySeen, classify, detect
from checkpoint_tui.frameworks.strands import ToolCall, guarded_activity_as_tool, owns, tool_call_key

# --- the key and the guarded tool ----------------------------------------------------------------------


def test_the_key_names_the_workflow_and_the_tool_use() -> None:
    env = activity_env("wf-1")
    call = ToolCall(tool_use_id="tooluse_abc", tool_name="send_email_guarded")
    assert env.run(tool_call_key, call) == "strands:wf-1:tooluse_abc"
    for bad in (ToolCall(tool_use_id="", tool_name="t"), None, {"tool_use_id": "x"}):
        with pytest.raises(EffectRefused):
            env.run(tool_call_key, bad)  # type: ignore[arg-type]
    with pytest.raises(EffectRefused):  # outside an activity there is no workflow to name
        tool_call_key(call)


@activity.defn
async def notify(call: ToolCall, to: str, times: int = 1) -> str:
    """Notify someone."""
    return f"{call.tool_use_id} {to} {times}"


@activity.defn
async def no_call(to: str) -> str:
    return to


def test_the_guarded_tool_shows_the_model_its_arguments_and_not_the_call() -> None:
    tool = guarded_activity_as_tool(notify, start_to_close_timeout=None)
    spec = tool.tool_spec
    assert tool.tool_name == spec["name"] == "notify" and spec["description"] == "Notify someone."
    assert set(spec["inputSchema"]["json"]["properties"]) == {"to", "times"}
    assert spec["inputSchema"]["json"]["required"] == ["to"]
    with pytest.raises(TypeError, match="ToolCall"):
        guarded_activity_as_tool(no_call)
    with pytest.raises(TypeError, match="activity"):
        guarded_activity_as_tool(lambda call, x: x)


async def test_the_guarded_tool_hands_the_activity_its_call_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trick behind `guarded_activity_as_tool`: temporalio-strands-agents' private
    `TemporalActivityTool` binds the tool's input to the activity's signature; the call goes in under
    its parameter's name (over anything the model put there). An upgrade that moves it fails here."""
    from temporalio import workflow
    from temporalio.strands_agents._temporal_activity_tool import TemporalActivityTool

    scheduled = []

    async def execute_activity(name: str, *args: object, **options: object) -> str:
        scheduled.append((name, args, options))
        return "done"

    monkeypatch.setattr(workflow, "execute_activity", execute_activity)
    tool = guarded_activity_as_tool(notify, start_to_close_timeout=None)
    assert isinstance(tool, TemporalActivityTool)
    use = {"toolUseId": "tooluse_1", "name": "notify", "input": {"to": "a@b.c", "times": 2, "call": "forged"}}
    events = [e async for e in tool.stream(use, {})]
    ((name, args, options),) = scheduled
    assert name == "notify" and args == () and options["start_to_close_timeout"] is None
    assert options["args"] == [ToolCall(tool_use_id="tooluse_1", tool_name="notify"), "a@b.c", 2]
    assert events[-1]["tool_result"] == {"toolUseId": "tooluse_1", "status": "success", "content": [{"text": "done"}]}


# --- the classifier on payloads as history holds them -------------------------------------------------

PLAN = '{"turns": 2, "to": "ops@example.com", "pace": 0.3, "think": 0.2}'
ARGS = '{"to": "ops@example.com", "body": "hello, this is turn 1", "pace": 0.3}'


def request(*messages: dict, model: object = "scripted-mailer") -> list[object]:
    """An `invoke_model` input, cut down from a real run's (tool_specs, system_prompt and
    invocation_state left out: the classifier does not read them)."""
    return [{"model_name": model, "messages": [{"role": "user", "content": [{"text": PLAN}]}, *messages]}]


def uses(*calls: tuple[str, str, str], tokens: tuple[int, int] = (29, 17)) -> list[object]:
    """An `invoke_model` result: the stream events of a response making these (id, name, input) calls."""
    events: list[object] = [{"messageStart": {"role": "assistant"}}]
    for call_id, name, arguments in calls:
        events += [
            {"contentBlockStart": {"start": {"toolUse": {"toolUseId": call_id, "name": name}}}},
            {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}},
            {"contentBlockStop": {}},
        ]
    usage = {"inputTokens": tokens[0], "outputTokens": tokens[1], "totalTokens": sum(tokens)}
    return [*events, {"messageStop": {"stopReason": "tool_use"}}, {"metadata": {"usage": usage, "metrics": {}}}]


def answer(text: str = "sent 2 emails to ops@example.com") -> list[object]:
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockDelta": {"delta": {"text": text}}},
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "end_turn"}},
        {"metadata": {"usage": {"inputTokens": 126, "outputTokens": 8, "totalTokens": 134}}},
    ]


def assistant(call_id: str, name: str, arguments: dict) -> dict:
    return {"role": "assistant", "content": [{"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}]}


def test_owns_only_strands_types_and_detect_tells_it_from_the_openai_agents_sdk() -> None:
    assert owns("invoke_model") and owns("invoke_model_streaming") and owns("strands-sandbox-execute")
    for kind in (
        "invoke_model_activity",
        "invoke_model_activity_streaming",
        "invoke_model ",
        "Invoke_Model",
        "send_email",
        "docs-call-tool",
        "",
    ):
        assert not owns(kind), kind
    assert detect(["send_email", "invoke_model"]) == "strands"
    assert detect(["invoke_model_activity", "invoke_model"]) == "openai-agents"  # the first that shows itself
    assert classify("openai-agents", [seen("invoke_model")])[0].cls == "tool"  # not its model: no confusion
    assert classify("strands", [seen("invoke_model_activity")])[0].cls == "other"


def test_a_guarded_run_as_history_holds_it() -> None:
    handed = {"tool_use_id": "tooluse_c08d6c1eea7341188354c4", "tool_name": "send_email_guarded"}
    units = classify(
        "strands",
        [
            seen(
                "invoke_model", request(), uses(("tooluse_c08d6c1eea7341188354c4", "send_email_guarded", ARGS)), "ask"
            ),
            seen(
                "send_email_guarded",
                [handed, "ops@example.com", "hello, this is turn 1", 0.3],
                "sent to ops@example.com (applied)",
            ),
            seen("invoke_model", request(), answer()),
        ],
    )
    assert [u.cls for u in units] == ["model", "tool", "model"]
    model, tool, last = units
    assert (model.name, model.tokens, model.label, model.summary) == (
        "scripted-mailer",
        46,
        "model · scripted-mailer",
        "ask",
    )
    assert last.tokens == 134 and last.call_id is None
    assert tool.name == "send_email_guarded" and tool.call_id == handed["tool_use_id"]
    assert tool.label == "tool · send_email_guarded · call c08d6c…" and tool.tokens is None
    blind = classify("strands", [seen("invoke_model", [], uses(("x", "t", ARGS))), seen("t")])
    assert tool.args_digest == blind[1].args_digest  # the model's input, whichever way the tool got it


def test_calls_match_by_name_in_order_and_an_activity_no_call_names_is_other() -> None:
    split = [
        {"contentBlockStart": {"start": {}}},  # some providers name the call in a delta
        {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"to": ', "toolUseId": "tooluse_3", "name": "a"}}}},
        {"contentBlockDelta": {"delta": {"toolUse": {"input": '"x"}'}}}},
        {"contentBlockStop": {}},
    ]
    units = classify(
        "strands",
        [
            seen("audit_hook"),  # before any model request: a hook's activity
            seen("invoke_model", request(), [*uses(("tooluse_1", "a", "{}"), ("tooluse_2", "b", "")), *split]),
            seen("b"),
            seen("a"),
            seen("a"),
            seen("audit_hook"),
            seen("invoke_model", request(), answer()),
        ],
    )
    assert [u.cls for u in units] == ["other", "model", "tool", "tool", "tool", "other", "model"]
    assert [u.call_id for u in units[2:5]] == ["tooluse_2", "tooluse_1", "tooluse_3"]
    assert units[2].args_digest == units[3].args_digest  # an empty input is no arguments, as Strands reads it
    same = classify("strands", [seen("invoke_model", [], uses(("z", "a", '{ "to":"x" }'))), seen("a")])
    assert same[1].args_digest == units[4].args_digest  # the same arguments, however spaced or split


def test_the_handed_call_wins_over_the_order_of_the_calls() -> None:
    def guarded(call_id: str, to: str) -> ActivitySeen:
        return seen("g", [{"tool_use_id": call_id, "tool_name": "g"}, to, "hi", 0.3])

    made = uses(("tooluse_1", "g", '{"to": "one"}'), ("tooluse_2", "g", '{"to": "two"}'))
    units = classify(
        "strands",
        [
            seen("invoke_model", [], made),
            guarded("tooluse_2", "two"),
            guarded("tooluse_1", "one"),
            seen("g", [None, "x"]),
        ],
    )
    assert [u.call_id for u in units[1:]] == ["tooluse_2", "tooluse_1", None]
    assert units[3].cls == "other"  # no call of the request is left for it
    alone = classify("strands", [seen("invoke_model", [], uses(("tooluse_2", "g", '{"to": "two"}'))), seen("g")])
    assert units[1].args_digest == alone[1].args_digest


def test_an_undecoded_result_is_read_from_the_next_request_and_unknown_calls_leave_tools_unnamed() -> None:
    turn1 = assistant("tooluse_1", "send_email", {"to": "x"})
    result1 = {"role": "user", "content": [{"toolResult": {"toolUseId": "tooluse_1", "status": "success"}}]}
    turn2 = assistant("tooluse_2", "send_email", {"to": "y"})
    units = classify(
        "strands",
        [
            seen("invoke_model", request(), None),  # its result did not decode (too big)
            seen("send_email", ["x", "hello", 0.3]),
            seen("invoke_model", request(turn1, result1), None),
            seen("send_email", ["y", "hello", 0.3]),
            seen("invoke_model", request(turn1, result1, turn2), answer()),
            seen("invoke_model", [{"model_name": None}], None),  # still running: nothing after it tells
            seen("send_email", ["z"]),
        ],
    )
    assert [(u.cls, u.call_id) for u in units if u.cls != "model"] == [
        ("tool", "tooluse_1"),
        ("tool", "tooluse_2"),
        ("tool", None),
    ]
    assert units[5].label == "model" and units[5].name is None and units[5].tokens is None
    from_messages = classify(
        "strands", [seen("invoke_model", [], uses(("q", "send_email", '{"to": "x"}'))), seen("send_email")]
    )
    assert units[1].args_digest == from_messages[1].args_digest


def test_mcp_calls_sandbox_operations_and_the_streaming_model() -> None:
    call = {"tool_name": "search", "arguments": {"q": 1}, "tool_use_id": "tooluse_abcdef12"}
    units = classify(
        "strands",
        [
            seen("invoke_model_streaming", request(model="bedrock"), uses(("tooluse_abcdef12", "search", '{"q": 1}'))),
            seen("docs-list-tools"),
            seen("docs-call-tool", [call]),
            seen("strands-sandbox-execute", [{"sandbox_name": "s"}]),
        ],
    )
    assert [u.cls for u in units] == ["model", "other", "mcp", "other"]
    assert units[0].label == "model · bedrock"
    assert units[1].label == "mcp · docs · list-tools" and units[3].label == "sandbox · execute"
    assert (units[2].name, units[2].call_id, units[2].label) == (
        "search",
        "tooluse_abcdef12",
        "mcp · docs · search · call abcdef…",
    )
    assert units[2].args_digest is not None


def test_tokens_are_the_last_usage_when_it_is_sane() -> None:
    def tokens(*events: object) -> int | None:
        return classify("strands", [seen("invoke_model", [], list(events))])[0].tokens

    def meta(i: object, o: object) -> dict:
        return {"metadata": {"usage": {"inputTokens": i, "outputTokens": o}}}

    assert tokens(meta(1, 2), {"messageStop": {}}, meta(10, 5)) == 15
    for bad in (meta(True, 1), meta(10**5000, 1), meta(-1, 1), meta("1", 1), meta(1, None), {"metadata": []}):
        assert tokens(bad) is None
    assert tokens() is None and classify("strands", [seen("invoke_model", [], {"metadata": {}})])[0].tokens is None


def hostile_results() -> list[object]:
    """Built when the test runs, not at import: every xdist worker imports every test module, and these
    values are slow to build and hundreds of thousands of objects for every garbage collection after."""
    return [
        None,
        7,
        HUGE,
        {"metadata": {}},
        [None] * 100_000,
        [{"contentBlockStart": {"start": {"toolUse": {"toolUseId": HUGE, "name": HUGE}}}}, {"contentBlockStop": {}}],
        [{"contentBlockStart": {"start": {"toolUse": {"toolUseId": "t\n1", "name": ["x"]}}}}, {"contentBlockStop": 1}],
        [
            {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "a", "name": "send_email"}}}},
            *[{"contentBlockDelta": {"delta": {"toolUse": {"input": "[" * 100_000}}}}] * 50,
            {"contentBlockStop": {}},
        ],
        [
            {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "b", "name": "send_email"}}}},
            {"contentBlockDelta": {"delta": {"toolUse": {"input": "9" * 5000}}}},
            {"contentBlockStop": {}},
        ],
        [{"contentBlockDelta": {"delta": {"toolUse": {"input": 5, "toolUseId": 3}}}}, {"contentBlockStop": {}}]
        * 20_000,
        [{"metadata": {"usage": {"inputTokens": 10**5000, "outputTokens": True}}}, nested(100_000)],
    ]


def hostile_args() -> list[object]:
    """Built when the test runs, as hostile_results()."""
    return [
        None,
        [],
        [None],
        "str",
        [nested(100_000)],
        [{"model_name": "\x1b[31m[bold]red\n" * 1000, "messages": HUGE}],
        [{"messages": [{"content": [{"toolUse": {"toolUseId": str(i), "name": "t"}}] * 3} for i in range(50_000)]}],
        [{"messages": [{"content": [{"toolUse": {"toolUseId": "x", "input": nested(200)}}] * 100_000}]}],
        [{"tool_use_id": HUGE, "tool_name": HUGE}, 1],
        [{"tool_use_id": "t", "tool_name": None}, nested(100)],
        [{"tool_name": ["x"], "arguments": nested(1000), "tool_use_id": 5}],
    ]


HOSTILE_TYPES: list[object] = [
    "invoke_model",
    "send_email",
    "docs-call-tool",
    "-list-tools",
    "strands-sandbox-",
    None,
    7,
    "\x00\x1b[2J",
    "a" * 10**6 + "-call-tool",
]


def test_hostile_payloads_never_raise_and_labels_stay_short() -> None:
    args, results = hostile_args(), hostile_results()
    batch = [seen("invoke_model", a, r, r) for a in args for r in results[::2]]
    batch += [seen(t, a, r) for t in HOSTILE_TYPES for a in args for r in results[1::4]]
    batch += [seen("invoke_model", a, None) for a in args] + [seen("send_email", a) for a in args]
    batch += [seen(t, HUGE, HUGE, HUGE) for t in HOSTILE_TYPES]  # args not even a list
    units = classify_in_time("strands", batch)  # bounded: each value is sliced or walked with a budget
    assert_bounded(units, ("model", "tool", "mcp", "other"), name_max=48)
    assert all(u.summary is None or (len(u.summary) <= 200 and u.summary.isprintable()) for u in units)
    json.dumps([dataclasses.asdict(u) for u in units])  # plain data all the way
