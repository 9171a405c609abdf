"""A hostile model server: every answer ends in a valid decision, ProviderUnavailable (the offline
fallback) or GuardrailFailure (the guardrail), never another exception; then one real run on real
worker processes against a server that rotates through the hostile answers."""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoint_tui.model import openai_compat
from checkpoint_tui.model.decision import (
    FORBIDDEN,
    MAX_EXPRESSION_CHARS,
    MAX_NOTE_CHARS,
    MAX_THOUGHT_CHARS,
    DecisionError,
    validate_decision,
)
from checkpoint_tui.model.extract import ExtractError, extract_decision
from checkpoint_tui.model.openai_compat import GuardrailFailure, ProviderUnavailable, ask_model
from checkpoint_tui.model.transport import MAX_BODY_BYTES
from checkpoint_tui.settings import ModelOptions, Settings
from conftest import supervised
from model_server import Raw, StandIn, as_json, completion

VALID = '{"action": "compute", "args": {"expression": "6*7"}, "thought": "multiply"}'
DEEP = "[" * 20_000 + "]" * 20_000


def note(text: str, thought: str = "t") -> str:
    return json.dumps({"action": "note", "args": {"text": text}, "thought": thought})


BOMB = json.dumps({"action": "compute", "args": {"expression": "((9**999)**999)**999"}, "thought": "big"})
SURROGATE = note("bad \ud800 text")  # a \\ud800 escape inside the answer's JSON
RAW_SURROGATE = '{"action": "note", "args": {"text": "a\udc80b"}, "thought": "t"}'  # the character itself
RAW_BOTH = '{"action": "note", "args": {"text": "a\udc80 \x00"}, "thought": "t"}'  # a real NUL, too
NUL = note("nul \x00 here")
ESCAPE = note("\x1b[2Jcleared")
OVERLONG = note("n" * (MAX_NOTE_CHARS + 1))
TRICKLE = as_json(completion(VALID), every_s=0.3)
HUGE = as_json(completion("x" * (MAX_BODY_BYTES + 10)))
HUGE_UNDECLARED = replace(HUGE, length=False)


async def ask(server: StandIn, timeout_s: float = 5.0, model: str | None = "stand-in-model"):
    return await ask_model(ModelOptions(server.url, model, timeout_s=timeout_s), 2, 5, "previous")


# --- one hostile answer each -----------------------------------------------------------------------

NESTED_LISTS: list = []
for _ in range(900):  # deep, but within what the JSON parser takes
    NESTED_LISTS = [NESTED_LISTS]
GZIPPED = Raw(gzip.compress(json.dumps(completion(VALID)).encode()), headers=(("Content-Encoding", "gzip"),))
UNAVAILABLE = {
    "huge body, declared": (HUGE, "more than 1000000 bytes"),
    "huge body, streamed": (HUGE_UNDECLARED, "more than 1000000 bytes"),
    "non-JSON body": (Raw(b"<html>busy</html>"), "non-JSON"),
    "invalid UTF-8": (Raw(b'{"choices": "\xff\xfe"}'), "non-JSON"),
    "a huge integer": (Raw(b'{"choices": ' + b"9" * 5000 + b"}"), "non-JSON"),
    "nested brackets as the body": (Raw(b'{"choices": ' + DEEP.encode() + b"}"), "non-JSON"),
    "a JSON list": (as_json([completion(VALID)]), "not an object"),
    "choices: []": (as_json({**completion(VALID), "choices": []}), "without choices"),
    "choices: a string": (as_json({**completion(VALID), "choices": "a"}), "without choices"),
    "message: a string": (as_json({"choices": [{"message": VALID}]}), "without choices"),
    "content: a number": (as_json(completion(42)), "not a string"),
    "content: an object": (as_json(completion({"text": VALID})), "not a string"),
    "content: nested lists": (as_json(completion(NESTED_LISTS)), "not a string"),
    "gzip despite identity": (GZIPPED, "compressed"),
    "a redirect": (Raw(b"", 302, headers=(("Location", "http://127.0.0.1:9/"),)), "answered 302"),
    "a 500": (Raw(b"{}", 500), "answered 500"),
    "a bad Content-Length": (Raw(b"{}", length=False, headers=(("Content-Length", "x"),)), "failed"),
}


@pytest.mark.parametrize("name", list(UNAVAILABLE))
async def test_odd_answers_are_unavailable(server, name):
    raw, reason = UNAVAILABLE[name]
    server.reply(raw, VALID)
    with pytest.raises(ProviderUnavailable, match=reason):
        await ask(server)


async def test_trickle_hits_the_total_deadline(server):
    """One byte every 0.3 s resets a read timeout forever; the deadline covers the whole exchange."""
    server.reply(TRICKLE)
    t = time.monotonic()
    with pytest.raises(ProviderUnavailable, match="timed out"):
        await ask(server, timeout_s=1.5)
    assert time.monotonic() - t < 1.5 + 1.0


@pytest.mark.parametrize(
    "models, reason",
    [
        (Raw(b'{"error": "no"}', 400), "/v1/models answered 400"),
        (as_json({"data": 5}), "lists no models"),
        (as_json({"data": [{"id": "bad\x00id"}, {"id": "x" * 500}, {"id": 7}, "x"]}), "lists no models"),
        (Raw(b"[" * 20_000), "non-JSON"),
    ],
    ids=["400", "data: 5", "unusable ids", "nested"],
)
async def test_odd_model_lists_are_unavailable(server, models, reason):
    server.models_replies = [models]
    with pytest.raises(ProviderUnavailable, match=reason):
        await ask(server)


async def test_unusable_model_ids_are_skipped(server):
    server.models = [{"id": "evil\u202eid"}, {"id": "\ud800"}, {"id": "fine-model", "owned_by": "x"}]
    server.reply(VALID)
    a = await ask(server, model=None)
    assert a.provider.endswith("/fine-model")


async def test_unusable_url_is_unavailable():
    with pytest.raises(ProviderUnavailable, match="not usable"):
        await ask_model(ModelOptions("http://[::1"), 1, 1, None)


@pytest.mark.parametrize(
    "usage",
    [
        [],
        "lots",
        {"prompt_tokens": -5, "completion_tokens": 3},
        {"prompt_tokens": True, "completion_tokens": 3},
        {"prompt_tokens": 10**30},
        {"prompt_tokens": 1.5, "completion_tokens": 2},
    ],
)
async def test_odd_usage_is_estimated(server, usage):
    server.reply(as_json(completion(VALID, usage=usage)))
    a = await ask(server)
    assert a.decision.args == {"expression": "6*7"} and 0 < a.tokens < 1000


GARBAGE = {
    "20,000 nested brackets": DEEP,
    "20,000 open braces": "{" * 20_000,
    "a \\ud800 escape": SURROGATE,
    "a lone surrogate": RAW_SURROGATE,
    "a \\u0000 escape": NUL,
    "a real NUL and a surrogate": RAW_BOTH,
    "a terminal escape": ESCAPE,
    "an overlong note": OVERLONG,
    "200 kB of prose": "x" * 200_000,
    "null content": as_json(completion(None)),
    "no content, odd finish_reason": as_json({"choices": [{"message": {}, "finish_reason": ["odd"]}]}),
}


@pytest.mark.parametrize("name", list(GARBAGE))
async def test_garbage_is_reprompted_once(server, name):
    server.reply(GARBAGE[name], VALID)
    t = time.monotonic()
    a = await ask(server)
    assert "reprompted" in a.note and a.decision.args == {"expression": "6*7"}
    assert time.monotonic() - t < 2.0
    echoed = server.chats()[-1]["body"]["messages"][-2]["content"]
    assert not FORBIDDEN.search(echoed) and len(echoed) <= 16_000


LONG_THOUGHT = note("x", "t" * (MAX_THOUGHT_CHARS + 1))
LONG_EXPRESSION = json.dumps({"action": "compute", "args": {"expression": "1+" * MAX_EXPRESSION_CHARS}, "thought": "t"})


@pytest.mark.parametrize(
    "answer",
    [DEEP, SURROGATE, RAW_SURROGATE, NUL, OVERLONG, LONG_THOUGHT, LONG_EXPRESSION],
    ids=["nested", "surrogate escape", "surrogate", "NUL", "long note", "long thought", "long expression"],
)
async def test_persistent_garbage_is_the_guardrail_with_storable_evidence(server, answer):
    server.reply(answer)
    with pytest.raises(GuardrailFailure) as err:
        await ask(server)
    assert not FORBIDDEN.search(err.value.raw) and err.value.raw.encode("utf-8")
    assert len(err.value.raw) <= openai_compat.RAW_KEPT_CHARS


async def test_the_bomb_is_a_valid_decision(server):
    """The model layer passes the expression on; the tool refuses it (tests/test_tool.py)."""
    server.reply(BOMB)
    assert (await ask(server)).decision.args == {"expression": "((9**999)**999)**999"}


async def test_a_model_layer_bug_falls_back_instead_of_retrying(tmp_path, monkeypatch):
    """Belt and braces in the llm activity: an exception ask_model should never raise still ends in
    the offline provider, with the exception's type as the reason (not in 8 retries of the activity)."""
    from checkpoint_tui.loop_worker import activities
    from checkpoint_tui.loop_worker.shared import LlmInput, ModelRef
    from checkpoint_tui.model import openai_compat

    async def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(openai_compat, "ask_model", broken)  # imported by the activity at its first call
    acts = activities.AgentActivities(Settings(home=tmp_path))
    answer = await acts._decide(LlmInput("run-x", 1, 2, 0.0, None, ModelRef("http://127.0.0.1:9", None)))
    assert answer.provider == "offline (fallback: unexpected RuntimeError)"


# --- properties ------------------------------------------------------------------------------------

bad_char = st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff", "\x1b", "\x7f", "\x85", "\r", "\u202e"])
any_text = st.text(st.characters(), max_size=30)  # no filter: lone surrogates and NUL included


def decision_with(field: str, value: str) -> dict:
    obj = {"action": "note", "args": {"text": "ok"}, "thought": "ok"}
    if field == "expression":
        obj = {"action": "compute", "args": {"expression": value}, "thought": "ok"}
    elif field == "text":
        obj["args"] = {"text": value}
    else:
        obj["thought"] = value
    return obj


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["expression", "text", "thought"]), st.text(max_size=20), bad_char, st.text(max_size=20))
def test_validate_never_accepts_nul_or_lone_surrogates(field, before, bad, after):
    with pytest.raises(DecisionError):
        validate_decision(decision_with(field, before + "x" + bad + after))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["expression", "text", "thought"]), any_text)
def test_whatever_validate_accepts_can_be_stored(field, value):
    try:
        d = validate_decision(decision_with(field, value))
    except DecisionError:
        return
    for text in (*d.args.values(), d.thought):
        text.encode("utf-8")  # no lone surrogate
        assert "\x00" not in text and not FORBIDDEN.search(text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["expression", "text", "thought"]), any_text, st.booleans())
def test_extract_gives_a_storable_decision_or_our_error(field, value, escaped):
    text = json.dumps(decision_with(field, value), ensure_ascii=escaped)
    try:
        found = extract_decision(text, truncated=True)
    except ExtractError:
        return
    for s in (*found.decision.args.values(), found.decision.thought):
        s.encode("utf-8")
        assert not FORBIDDEN.search(s)


# --- one real run ----------------------------------------------------------------------------------

MODEL_TIMEOUT_S = 1.5
STEPS = 8


def rotation(server: StandIn) -> list[str]:
    """Per request, in order; the comment is how each step must end."""
    server.models_replies = [Raw(b'{"error": "bad"}', 400)]  # step 1: /v1/models 400 -> offline
    server.reply(
        TRICKLE,  # step 2: the deadline -> offline
        HUGE_UNDECLARED,  # step 3: over the cap -> offline
        DEEP,
        as_json(completion(note("all good"), usage=[])),  # step 4: garbage, then a valid note
        NUL,
        BOMB,  # step 5: garbage, then the arithmetic bomb (the tool answers `error: ...`)
        SURROGATE,
        as_json(completion(42)),  # step 6: garbage, then a number for content -> offline
        OVERLONG,
        as_json({"choices": []}),  # step 7: garbage, then no choices -> offline
        Raw(b"\x00\xff not json"),  # step 8: -> offline
        VALID,
    )
    return ["answered 400", "timed out", "more than", None, None, "not a string", "without choices", "non-JSON"]


async def test_hostile_server_under_a_real_run(home, temporal_address, server, monkeypatch):
    """Every step ends in a decision or the offline fallback with its reason, on the first attempt (no
    uncaught error, no heartbeat lost to a frozen worker), and the ledger stays exactly-once. Then a
    guardrail whose raw answer holds a NUL and a lone surrogate: FAILED at once, the evidence stored."""
    from checkpoint_tui.core.runs import start_run, wait_for_run
    from checkpoint_tui.core.snapshot import build_snapshot
    from checkpoint_tui.ledger.store import connect
    from checkpoint_tui.loop_worker.shared import ModelRef

    # The worker gets its model deadline from the settings that spawn it (Settings.child_env sets
    # CHECKPOINT_MODEL_TIMEOUT from them, over the caller's environment).
    home = replace(home, models=replace(home.models, timeout_s=MODEL_TIMEOUT_S))
    reasons = rotation(server)
    model = ModelRef(server.url, "stand-in-model")
    async with supervised(home, temporal_address) as (_, client):
        t = time.monotonic()
        run_id = await start_run(home, client, steps=STEPS, pace=0, model=model)
        assert await wait_for_run(home, client, run_id, timeout=90) == "COMPLETED"
        elapsed = time.monotonic() - t
        snap = build_snapshot(connect(home.db_path), home, run_id)
        assert (snap.completed_steps, snap.duplicates, snap.outbox_lines) == (STEPS, 0, STEPS)
        assert [s.attempt for s in snap.steps] == [1] * STEPS, [(s.step, s.attempt) for s in snap.steps]
        host = server.url.removeprefix("http://")
        for s, reason in zip(snap.steps, reasons, strict=True):
            if reason is None:
                assert s.provider == f"{host}/stand-in-model", (s.step, s.provider)
            else:
                assert s.provider.startswith("offline (fallback: ") and reason in s.provider, (s.step, s.provider)
        bomb = snap.steps[4]
        assert bomb.action == "compute" and bomb.tool_result.startswith("error: ")
        assert "power too large" in bomb.tool_result
        assert elapsed < 20, f"the run took {elapsed:.1f} s"  # ~2 s quiet: step 2 waits out its 1.5 s deadline

        server.reply(RAW_BOTH)
        run_id = await start_run(home, client, steps=2, pace=0, model=model)
        assert await wait_for_run(home, client, run_id, timeout=60) == "FAILED"
        snap = build_snapshot(connect(home.db_path), home, run_id)
        bad = snap.guardrail_step
        assert bad is not None and bad.step == 1 and bad.attempt == 1
        assert bad.raw_output == RAW_BOTH.replace("\udc80", "\ufffd").replace("\x00", "\ufffd")
        assert snap.ledger_rows == 0
