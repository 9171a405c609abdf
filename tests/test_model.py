"""The model layer against a stand-in OpenAI-compatible server, plus the extractor's properties."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkpoint_tui.model import openai_compat
from checkpoint_tui.model.decision import FORBIDDEN
from checkpoint_tui.model.extract import ExtractError, extract_decision
from checkpoint_tui.model.openai_compat import GuardrailFailure, ProviderUnavailable, ask_model
from checkpoint_tui.settings import ModelOptions
from model_server import StandIn

VALID = '{"action": "compute", "args": {"expression": "6*7"}, "thought": "multiply"}'


async def ask(server: StandIn, model: str | None = "stand-in-model", **options):
    return await ask_model(ModelOptions(server.url, model, **options), 2, 5, "previous")


async def test_clean_json(server):
    server.reply(VALID)
    a = await ask(server)
    assert a.decision.args == {"expression": "6*7"} and a.note == "json"
    assert a.provider == f"{server.url.removeprefix('http://')}/stand-in-model"
    assert a.tokens == 70 and a.cost_usd == 0.0  # loopback: a local server costs nothing
    chat = [r for r in server.requests if r["path"] == "/v1/chat/completions"][0]["body"]
    assert chat["response_format"]["type"] == "json_schema"


async def test_fenced(server):
    server.reply(f"Here you go:\n```json\n{VALID}\n```\nanything else?")
    assert (await ask(server)).note == "fenced"


async def test_prose_wrapped(server):
    server.reply(f'Sure! I think {{not json}} so: {VALID} — and a brace "}}" later.')
    assert (await ask(server)).note == "scan"


async def test_truncated_is_recorded(server):
    server.reply('{"action": "note", "args": {"text": "checkpoint"}, "thought": "half a thou', finish="length")
    a = await ask(server)
    assert "truncated" in a.note and a.decision.action == "note"


async def test_garbage_once_then_reprompt(server):
    server.reply("I would rather explain at length.", VALID)
    a = await ask(server)
    assert "reprompted" in a.note
    last = [r for r in server.requests if r["path"] == "/v1/chat/completions"][-1]["body"]
    assert "previous reply was rejected" in last["messages"][-1]["content"]


async def test_garbage_twice_is_guardrail(server):
    server.reply("prose " * 200, "still prose")
    with pytest.raises(GuardrailFailure) as err:
        await ask(server)
    assert err.value.raw == "still prose"


async def test_401_is_unavailable(server):
    server.models_status = 401
    with pytest.raises(ProviderUnavailable, match="401"):
        await ask(server)


async def test_hanging_server_times_out(server):
    server.hang_s = 5
    t = time.monotonic()
    with pytest.raises(ProviderUnavailable, match="timed out"):
        await ask(server, timeout_s=0.5)
    assert time.monotonic() - t < 3


async def test_unreachable_is_unavailable():
    from checkpoint_tui.ops.procs import free_port

    with pytest.raises(ProviderUnavailable, match="unreachable"):
        await ask_model(ModelOptions(f"http://127.0.0.1:{free_port()}"), 1, 1, None)


async def test_listed_model_wins_over_configured(server):
    server.models = [{"id": "served-one", "owned_by": "x"}]
    server.reply(VALID)
    a = await ask(server, model="not-loaded")
    assert a.provider.endswith("/served-one") and "not-loaded not served" in a.note
    assert [r for r in server.requests if r["path"] == "/v1/chat/completions"][0]["body"]["model"] == "served-one"


async def test_llamacpp_gets_a_grammar_and_rejection_falls_back_to_plain(server):
    server.models = [{"id": "smol", "owned_by": "llamacpp"}]
    server.reply(VALID)
    await ask(server, model=None)
    assert "grammar" in server.requests[-1]["body"]
    server.reject_constraints = True
    openai_compat._models_cache.clear()
    server.models = [{"id": "plain", "owned_by": "x"}]
    a = await ask(server, model=None)
    assert a.decision.action == "compute"
    assert "response_format" not in server.requests[-1]["body"]


async def test_key_is_sent_but_never_in_the_answer(server):
    server.reply(VALID)
    a = await ask(server, api_key="sk-test-not-a-real-key-000000")
    assert server.requests[0]["auth"] == "Bearer sk-test-not-a-real-key-000000"
    assert "sk-test" not in json.dumps(a.__dict__, default=str)


# --- the extractor's properties ------------------------------------------------------------------

# What a decision may hold: no control characters (but tab and newline), surrogates or bidi overrides.
storable = st.characters(exclude_categories=("Cs", "Cc"), include_characters="\t\n").filter(
    lambda c: not FORBIDDEN.match(c)
)
decisions = st.one_of(
    st.builds(
        lambda e, t: {"action": "compute", "args": {"expression": e}, "thought": t},
        st.text(storable, min_size=1, max_size=20).filter(str.strip),
        st.text(storable, max_size=30),
    ),
    st.builds(
        lambda x, t: {"action": "note", "args": {"text": x}, "thought": t},
        st.text(storable, min_size=1, max_size=40).filter(str.strip),
        st.text(storable, max_size=30),
    ),
)
prose = st.text(alphabet=st.characters(blacklist_characters="{}`"), max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_gives_a_decision_or_our_error(text):
    try:
        d = extract_decision(text, truncated=True)
    except ExtractError:
        return
    assert d.decision.action in ("compute", "note")


@settings(max_examples=300, deadline=None)
@given(decisions, prose, prose, st.sampled_from(["plain", "fenced", "prose"]))
def test_embedded_decision_is_found(obj, before, after, wrap):
    body = json.dumps(obj)
    text = {"plain": body, "fenced": f"{before}\n```json\n{body}\n```\n{after}", "prose": f"{before} {body} {after}"}[
        wrap
    ]
    found = extract_decision(text)
    assert found.decision.action == obj["action"]
    assert found.decision.args == obj["args"] and found.decision.thought == obj["thought"]


# --- through the real worker ---------------------------------------------------------------------


async def test_model_backed_run_end_to_end(home, client, supervisor, server):
    from dataclasses import replace

    from checkpoint_tui.core.runs import start_run, wait_for_run
    from checkpoint_tui.core.snapshot import build_snapshot
    from checkpoint_tui.ledger.store import connect
    from checkpoint_tui.loop_worker.shared import ModelRef

    server.reply(f"Sure:\n```json\n{VALID}\n```")
    run_id = await start_run(home, client, steps=4, pace=0, model=ModelRef(server.url, "stand-in-model"))
    assert await wait_for_run(home, client, run_id, timeout=60) == "COMPLETED"
    snap = build_snapshot(connect(home.db_path), home, run_id)
    host = server.url.removeprefix("http://")
    assert {s.provider for s in snap.steps} == {f"{host}/stand-in-model"}
    assert all(s.tokens and s.tokens > 0 for s in snap.steps)
    assert snap.duplicates == 0 and snap.outbox_lines == 4

    # A server that refuses the key: the run completes on the offline provider, and says why.
    server.models_status = 401
    openai_compat._models_cache.clear()
    run_id = await start_run(home, client, steps=2, pace=0, model=ModelRef(server.url, None))
    assert await wait_for_run(home, client, run_id, timeout=60) == "COMPLETED"
    providers = {s.provider for s in build_snapshot(connect(home.db_path), home, run_id).steps}
    assert len(providers) == 1
    provider = providers.pop()
    assert provider.startswith("offline (fallback: ") and "refused the key (401)" in provider

    # Persistent garbage: a non-retryable GuardrailError with the raw answer on the step row.
    server.models_status = 200
    server.reply("no json, just vibes [bold]")
    run_id = await start_run(home, client, steps=3, pace=0, model=replace(ModelRef(server.url, None)))
    assert await wait_for_run(home, client, run_id, timeout=60) == "FAILED"
    snap = build_snapshot(connect(home.db_path), home, run_id)
    bad = snap.guardrail_step
    assert bad is not None and bad.step == 1 and bad.attempt == 1  # not retried
    assert bad.raw_output == "no json, just vibes [bold]" and "Guardrail" in bad.error
    assert snap.ledger_rows == 0
