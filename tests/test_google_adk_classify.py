"""Google ADK on Temporal, piece by piece: the exactly-once key of a tool call
(`checkpoint_tui.frameworks.google_adk`) and the classifier (`checkpoint_tui.frameworks.google_adk`)
on payloads as history holds them (taken from a run of examples/agents/google_adk_mailer, cut small)
and on hostile ones. The example itself, run for real and under the lab: tests/test_google_adk_lab.py."""

from __future__ import annotations

import pytest

from agent_examples import HUGE, activity_env, classify_in_time, nested, seen
from checkpoint_tui.effects import EffectRefused
from checkpoint_tui.frameworks import UnitInfo, classify, detect
from checkpoint_tui.frameworks.google_adk import owns, recognises, tool_call_key

PLAN = '{"turns": 2, "to": "ops@example.com", "pace": 0.3, "think": 0.2}'
ARGS = {"to": "ops@example.com", "body": "hello, this is turn 1", "pace": 0.3}


def test_the_key_names_the_workflow_and_the_function_call() -> None:
    from temporalio.google_adk.workflow import ToolContextSnapshot

    env = activity_env("wf-1")
    snapshot = ToolContextSnapshot(state={"a": 1}, function_call_id="call_abc")
    assert env.run(tool_call_key, snapshot) == env.run(tool_call_key, "call_abc") == "google-adk:wf-1:call_abc"
    for bad in (ToolContextSnapshot(), None, {"function_call_id": "x"}, ""):
        with pytest.raises(EffectRefused):
            env.run(tool_call_key, bad)
    with pytest.raises(EffectRefused):  # outside an activity there is no workflow to name
        tool_call_key(snapshot)


def call(call_id: str | None, name: str = "send_email", args: object = ARGS) -> dict:
    return (
        {"function_call": {"id": call_id, "args": args, "name": name}}
        if call_id
        else {"function_call": {"args": args, "name": name}}
    )


def request(*contents: dict, model: object = "scripted-mailer") -> list[object]:
    """An `invoke_model` input (an `LlmRequest`), cut down from a real run's (config.tools left out)."""
    config = {"system_instruction": "Send one email per turn.", "labels": {"adk_agent_name": "mailer"}}
    return [{"model": model, "contents": [{"parts": [{"text": PLAN}], "role": "user"}, *contents], "config": config}]


def responds(*parts: dict, usage: object = (184, 18, 202)) -> list[object]:
    """An `invoke_model` result: one `LlmResponse` with these parts and its usage_metadata."""
    counts = (
        dict(zip(("prompt_token_count", "candidates_token_count", "total_token_count"), usage, strict=True))
        if isinstance(usage, tuple)
        else usage
    )
    return [
        {
            "model_version": "scripted-mailer",
            "content": {"parts": list(parts), "role": "model"},
            "usage_metadata": counts,
        }
    ]


ANSWER = responds({"text": "sent 2 emails to ops@example.com"}, usage=(351, 8, 359))
TURN_1 = {"parts": [call("call_ee25e7a7d0cb48b498f77154")], "role": "model"}
RESULT_1 = {
    "parts": [
        {
            "function_response": {
                "id": "call_ee25e7a7d0cb48b498f77154",
                "name": "send_email",
                "response": {"result": "sent"},
            }
        }
    ],
    "role": "user",
}


def test_owns_its_types_and_recognises_its_payloads_not_strands() -> None:
    assert owns("invoke_model") and owns("invoke_model_streaming") and not owns("invoke_model_activity")
    assert recognises(seen("invoke_model", request())) and recognises(seen("invoke_model", [], ANSWER))
    streaming = [{"llm_request": request()[0], "streaming_topic": "t", "streaming_batch_interval": 0.1}]
    assert recognises(seen("invoke_model_streaming", streaming))
    strands = seen("invoke_model", [{"model_name": "m", "messages": []}], [{"messageStart": {"role": "assistant"}}])
    for other_seen in (strands, seen("invoke_model"), seen("send_email", request()), seen(None, request())):
        assert not recognises(other_seen)


def test_detect_tells_adk_from_strands_by_the_payloads() -> None:
    assert detect([seen("invoke_model", request(), ANSWER)]) == "google-adk"


def test_a_blind_and_a_guarded_run_as_history_holds_them() -> None:
    snapshot = {"state": {}, "function_call_id": "call_ee25e7a7d0cb48b498f77154"}
    given = ["ops@example.com", "hello, this is turn 1", 0.3]
    for tool, args in (("send_email", given), ("send_email_guarded", [*given, snapshot])):
        units = classify(
            "google-adk",
            [
                seen("invoke_model", request(), responds(call("call_ee25e7a7d0cb48b498f77154", tool)), "mailer"),
                seen(tool, args, "sent to ops@example.com"),
                seen("invoke_model", request(TURN_1, RESULT_1), ANSWER, "mailer"),
            ],
        )
        assert [u.cls for u in units] == ["model", "tool", "model"]
        model, unit, last = units
        assert (model.name, model.tokens, model.summary) == ("scripted-mailer", 202, "mailer")
        assert model.label == "model · scripted-mailer"
        assert last.tokens == 359 and unit.tokens is None
        assert unit == UnitInfo(
            "tool", tool, "call_ee25e7a7d0cb48b498f77154", unit.args_digest, None, None, f"tool · {tool} · call ee25e7…"
        )
    blind_alone = classify("google-adk", [seen("send_email", ["ops@example.com", "hello, this is turn 1", 0.3])])
    assert blind_alone[0].cls == "other"  # no request before it names it: a hook's activity


def test_calls_match_by_name_in_order_the_snapshot_wins_and_an_unnamed_activity_is_other() -> None:
    made = responds(call("call_1", "a", {"x": 1}), call("call_2", "b"), call("call_3", "a", {"x": 3}))
    units = classify(
        "google-adk",
        [
            seen("audit_hook"),  # before any model request: a hook's activity
            seen("invoke_model", request(), made),
            seen("b"),
            seen("a", [{"state": {}, "function_call_id": "call_3"}]),
            seen("a"),
            seen("audit_hook"),
            seen("invoke_model", request(), ANSWER),
        ],
    )
    assert [u.cls for u in units] == ["other", "model", "tool", "tool", "tool", "other", "model"]
    assert [u.call_id for u in units[2:5]] == ["call_2", "call_3", "call_1"]
    assert (
        units[3].args_digest
        == classify("google-adk", [seen("invoke_model", [], responds(call("z", "a", {"x": 3}))), seen("a")])[
            1
        ].args_digest
    )  # the model's arguments, not the snapshot


def test_an_id_adk_made_is_read_from_the_snapshot_and_an_undecoded_result_from_the_next_request() -> None:
    no_id = responds(call(None, "g"))
    handed = seen("g", ["x", {"state": {}, "function_call_id": "adk-6f1c"}])
    units = classify("google-adk", [seen("invoke_model", [], no_id), handed, seen("g")])
    assert [(u.cls, u.call_id) for u in units] == [("model", None), ("tool", "adk-6f1c"), ("other", None)]
    units = classify(
        "google-adk",
        [
            seen("invoke_model", request(), None),  # its result did not decode (too big)
            seen("send_email", ["x", "hello", 0.3]),
            seen("invoke_model", request(TURN_1, RESULT_1), ANSWER),
            seen("invoke_model", [{"model": None}], None),  # still running: nothing after it tells
            seen("send_email", ["z"]),
        ],
    )
    assert [(u.cls, u.call_id) for u in units] == [
        ("model", None),
        ("tool", "call_ee25e7a7d0cb48b498f77154"),
        ("model", None),
        ("model", None),
        ("tool", None),
    ]
    assert units[3].label == "model" and units[3].tokens is None


def test_mcp_calls_and_the_streaming_model() -> None:
    mcp = {
        "factory_argument": None,
        "name": "search",
        "arguments": {"q": 1},
        "tool_context": {"function_call_id": "call_abcdef12", "tool_confirmation": None},
    }
    streamed = [
        {"partial": True, "content": {"parts": [{"text": "th"}]}},
        {
            "content": {"parts": [call("call_abcdef12", "search", {"q": 1})]},
            "usage_metadata": {"prompt_token_count": 10, "candidates_token_count": 5},
        },
    ]
    wrapped = [{"llm_request": request(model="gemini-2.5-flash")[0], "streaming_topic": "t"}]
    units = classify(
        "google-adk",
        [
            seen("invoke_model_streaming", wrapped, streamed),
            seen("docs-list-tools"),
            seen("docs-call-tool", [mcp]),
            seen("docs-server-session"),
        ],
    )
    assert [u.cls for u in units] == ["model", "other", "mcp", "other"]
    assert (units[0].label, units[0].tokens) == ("model · gemini-2.5-flash", 15)
    assert units[1].label == "mcp · docs · list-tools" and units[3].label == "mcp · docs · server-session"
    assert (units[2].name, units[2].call_id, units[2].label) == (
        "search",
        "call_abcdef12",
        "mcp · docs · search · call abcdef…",
    )


def test_tokens_are_the_last_usage_when_it_is_sane() -> None:
    def tokens(*usages: object) -> int | None:
        return classify("google-adk", [seen("invoke_model", [], [{"usage_metadata": u} for u in usages])])[0].tokens

    assert tokens({"total_token_count": 3}, {"prompt_token_count": 10, "candidates_token_count": 5}) == 15
    assert tokens({"total_token_count": 9, "prompt_token_count": 1}) == 9
    for bad in (
        {"total_token_count": True},
        {"prompt_token_count": 10**5000, "candidates_token_count": 1},
        {"prompt_token_count": -1, "candidates_token_count": 1},
        {"prompt_token_count": "1"},
        [],
    ):
        assert tokens(bad) is None
    assert tokens() is None


def hostile_results() -> list[object]:
    """Built when the test runs, not at import: every xdist worker imports every test module, and these
    values are slow to build and hundreds of thousands of objects for every garbage collection after."""
    return [
        None,
        7,
        HUGE,
        {"usage_metadata": {}},
        [None] * 100_000,
        [nested(100_000)],
        [{"content": {"parts": [{"function_call": {"id": HUGE, "name": HUGE, "args": nested(100_000)}}]}}],
        [{"content": {"parts": [{"function_call": {"id": "t\n1", "name": ["x"]}}] * 100_000}}] * 3,
        [{"content": {"parts": [{"function_call": {"id": str(i), "name": "send_email"}} for i in range(50_000)]}}],
        [{"content": {"parts": HUGE}, "usage_metadata": {"total_token_count": 10**5000}, "partial": "yes"}],
    ]


def hostile_args() -> list[object]:
    """Built when the test runs, as hostile_results()."""
    return [
        None,
        [],
        [None],
        "str",
        [nested(100_000)],
        [{"model": "\x1b[31m[bold]red\n" * 1000, "contents": HUGE}],
        [{"contents": [{"parts": [{"function_call": {"id": str(i), "name": "t"}}] * 3} for i in range(50_000)]}],
        [{"llm_request": nested(1000)}],
        [{"state": HUGE, "function_call_id": HUGE}],
        [{"function_call_id": 5}, nested(100)],
        [{"name": ["x"], "arguments": nested(1000), "tool_context": {"function_call_id": HUGE}}],
    ]


HOSTILE_TYPES: list[object] = [
    "invoke_model",
    "invoke_model_streaming",
    "send_email",
    "docs-call-tool",
    "-list-tools",
    "-server-session",
    None,
    7,
    "\x00\x1b[2J",
    "a" * 10**6 + "-call-tool",
]


def test_hostile_payloads_never_raise_and_stay_bounded() -> None:
    arg_lists, results = hostile_args(), hostile_results()
    history = [
        seen(kind, args, result, summary)
        for kind in HOSTILE_TYPES
        for args in arg_lists[:4]
        for result in results[:3]
        for summary in (None, HUGE)
    ]
    history += [seen(kind, args, result) for kind in HOSTILE_TYPES[:4] for args in arg_lists for result in results]
    units = classify_in_time("google-adk", history, seconds=20)
    for unit in units:
        for text in (unit.name, unit.call_id, unit.label, unit.summary):
            assert text is None or (len(text) <= 256 and text.isprintable())
        assert unit.tokens is None or 0 <= unit.tokens < 2**53
    for s in history[:200]:
        recognises(s)
    detect(history)
