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


def test_mcp_activities_are_named_by_their_server_and_keep_their_call_out_of_the_tools() -> None:
    """The plugin's callTool input is {name, input, options: {toolCallId}}: its call is the MCP tool's,
    never a tool activity's beside it."""
    request = _result("c_mcp", 1)
    request["content"].append({"type": "tool-call", "toolCallId": "c_send", "toolName": "sendEmail", "input": "{}"})
    mcp_in = {"name": "read", "input": {"path": "a"}, "options": {"toolCallId": "c_mcp"}, "clientArgs": {}}
    run = [
        seen("invokeModel", [_request(1, [])], request),
        seen("files-listTools", [{}], []),
        seen("files-callTool", [mcp_in], {"content": []}),
        seen("notify", [{"to": "x"}], "ok"),  # named unlike its tool: matched by order to the one call left
    ]
    units = classify("ai-sdk", run)
    assert [u.cls for u in units] == ["model", "other", "mcp", "tool"]
    assert (units[2].name, units[2].call_id, units[3].call_id) == ("read", "c_mcp", "c_send")
    assert units[1].label == "mcp · files · listTools" and units[2].args_digest is not None


def test_a_call_id_is_never_a_neighbour_s() -> None:
    """Order decides only where as many activities as calls are left: a tool that made no activity (or
    an activity that is no tool's) leaves the rest without an id, never with the next one's; an
    activity handed its own id takes that call out of the matching."""
    request = {
        "content": [{"type": "tool-call", "toolCallId": f"c{i}", "toolName": f"t{i}", "input": "{}"} for i in (1, 2)]
    }
    run = [seen("invokeModel", [_request(1, [])], request), seen("audit_log", [{}], "ok")]
    assert classify("ai-sdk", run)[1].call_id is None  # two calls, one activity of neither's name
    run = [
        seen("invokeModel", [_request(1, [])], request),
        seen("send", [{"toolCallId": "c2"}], "ok"),
        seen("other_name", [{}], "ok"),
    ]
    assert [u.call_id for u in classify("ai-sdk", run)[1:]] == ["c2", "c1"]


def test_an_embedding_request_is_the_model_s_and_starts_no_step() -> None:
    run = _run(False)
    run.insert(1, seen("invokeEmbeddingModel", [{"modelId": "embed"}], {"embeddings": []}))
    units = classify("ai-sdk", run)
    assert [u.cls for u in units] == ["model", "model", "tool", "model", "tool", "model"]
    assert units[2].call_id == "call_A1"  # still the first request's call


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


def test_a_node_worker_command_is_typescript_behind_its_wrappers_too() -> None:
    for cmd in [("node lib/worker.js",), ("npm", "run", "worker"), ("/usr/bin/env", "A=1", "node", "w.js")]:
        assert language_of(cmd) == "typescript", cmd
    assert language_of(("sh", "-c", "cd app && node w.js")) == "python"  # `cd` is the program: not guessed
    assert language_of(("sh", "-c", "node w.js")) == language_of(("uv", "run", "node", "w.js")) == "typescript"
    for cmd in [("python", "w.py", "--role", "node"), ("/venv/bin/python", "-m", "app"), ("sh", "-c", "python w.py")]:
        assert language_of(cmd) == "python", cmd
