"""The Vercel AI SDK under Temporal's TypeScript plugin (`checkpoint_tui.frameworks.ai_sdk`): the
classifier on payloads as history holds them (taken from a run of examples/ts, cut small) and on
hostile ones. The example itself, run under the lab: tests/test_ts_agent.py."""

from __future__ import annotations

import json

from agent_examples import HUGE, assert_bounded, classify_in_time, nested, seen
from checkpoint_tui.frameworks import classify, detect
from checkpoint_tui.frameworks.base import language_of
from checkpoint_tui.frameworks.registry import get

WORKFLOW_ID = "TsAgentMailerGuarded-1"


def _request(turn: int, calls: list[str]) -> dict:
    """invokeModel's input: the model and the conversation so far (the calls made, their results)."""
    prompt: list[dict] = [{"role": "user", "content": [{"type": "text", "text": '{"turns":2}'}]}]
    for i, call in enumerate(calls, 1):
        part = {"toolCallId": call, "toolName": "sendEmail"}
        body = {"to": "ops@example.com", "body": f"hello, this is turn {i}"}
        prompt.append({"role": "assistant", "content": [{"type": "tool-call", **part, "input": body}]})
        prompt.append({"role": "tool", "content": [{"type": "tool-result", **part, "output": {"type": "text"}}]})
    return {
        "modelId": "scripted-mailer",
        "options": {"tools": [{"type": "function", "name": "sendEmail"}], "prompt": prompt},
    }


def _result(call: str | None, turn: int) -> dict:
    """invokeModel's result: a tool call (its input a JSON string), or the answer; the usage."""
    args = json.dumps({"to": "ops@example.com", "body": f"hello, this is turn {turn}"})
    content = (
        [{"type": "tool-call", "toolCallId": call, "toolName": "sendEmail", "input": args}]
        if call
        else [{"type": "text", "text": "sent 2 emails to ops@example.com"}]
    )
    usage = {"inputTokens": {"total": 245, "noCache": 245}, "outputTokens": {"total": 14, "text": 14}}
    return {"content": content, "finishReason": {"unified": "tool-calls"}, "usage": usage}


def _run(guarded: bool) -> list:
    send = "sendEmailGuarded" if guarded else "sendEmail"

    def tool(turn: int, call: str) -> object:
        arg = {"to": "ops@example.com", "body": f"hello, this is turn {turn}", "pace": 0.04}
        return seen(send, [{**arg, "toolCallId": call} if guarded else arg], "sent to ops@example.com")

    return [
        seen("invokeModel", [_request(1, [])], _result("call_A1", 1)),
        tool(1, "call_A1"),
        seen("invokeModel", [_request(2, ["call_A1"])], _result("call_B2", 2)),
        tool(2, "call_B2"),
        seen("invokeModel", [_request(3, ["call_A1", "call_B2"])], _result(None, 3)),
    ]


def test_the_plugin_is_detected_and_its_requests_and_calls_are_told_apart() -> None:
    for guarded in (False, True):
        run = _run(guarded)
        assert detect(run) == "ai-sdk" and get("ai-sdk").LANGUAGE == "typescript"  # type: ignore[union-attr]
        units = classify("ai-sdk", run)
        assert [u.cls for u in units] == ["model", "tool", "model", "tool", "model"]
        assert [u.call_id for u in units if u.cls == "tool"] == ["call_A1", "call_B2"]
        assert all(u.tokens == 259 and u.label == "model · scripted-mailer" for u in units if u.cls == "model")
        tool = units[1]
        assert tool.name == ("sendEmailGuarded" if guarded else "sendEmail") and tool.label.startswith("tool · send")


def test_the_same_arguments_give_the_same_digest_whoever_reads_them() -> None:
    """The blind tool's digest is of the model's arguments (a JSON string in the result): the same
    call re-run after a kill digests the same, however its text was spaced."""
    first = classify("ai-sdk", _run(False))[1]
    spaced = _run(False)
    spaced[0].result["content"][0]["input"] = '{ "body": "hello, this is turn 1",  "to": "ops@example.com" }'  # type: ignore[index]
    assert classify("ai-sdk", spaced)[1].args_digest == first.args_digest is not None


def test_a_call_id_handed_in_the_activity_input_wins_over_the_match() -> None:
    run = _run(True)
    run[1].args[0]["toolCallId"] = "call_own"  # type: ignore[index]
    assert classify("ai-sdk", run)[1].call_id == "call_own"


def test_mcp_activities_are_named_by_their_server() -> None:
    run = [
        seen("invokeModel", [_request(1, [])], _result("c1", 1)),
        seen("files-listTools", [{}], []),
        seen("files-callTool", [{"name": "read", "args": {"path": "a"}}], {"content": []}),
    ]
    units = classify("ai-sdk", run)
    assert [u.cls for u in units] == ["model", "other", "mcp"] and units[2].name == "read"
    assert units[1].label == "mcp · files · listTools"


def test_hostile_payloads_classify_in_bounded_time() -> None:
    hostile = [
        seen("invokeModel", [HUGE], {"content": [{"type": "tool-call", "toolCallId": HUGE}] * 50_000}),
        seen("sendEmail", [nested(5_000)], None),
        seen("invokeModel", [{"modelId": "\u202eevil\x00"}], {"usage": {"inputTokens": {"total": True}}}),
        seen("invokeModel", [None], {"content": "not a list", "usage": "x"}),
        seen("x-callTool", [[1, 2]], None),
    ]
    units = classify_in_time("ai-sdk", hostile)
    assert_bounded(units, ("model", "tool", "mcp", "other"))
    assert [u.cls for u in units][:3] == ["model", "tool", "model"] and units[2].tokens is None


def test_a_node_worker_command_is_typescript() -> None:
    assert language_of(("node lib/worker.js",)) == language_of(("npm run worker",)) == "typescript"
