"""Opt-in (`make test-model`): a 10-step run decided by a real local model (llama.cpp + SmolLM2-135M)."""

from __future__ import annotations

import os
import time

import pytest

from checkpoint_tui.core.runs import start_run, wait_for_run
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.shared import ModelRef

pytestmark = pytest.mark.skipif(
    os.environ.get("CHECKPOINT_REAL_MODEL") != "1", reason="opt-in: make test-model (needs llama.cpp, ~7 min build)"
)


@pytest.fixture
def model_url(home):
    from checkpoint_tui.ops.modelserver import ensure_model_server, stop_model_server

    url = ensure_model_server(home)
    yield url
    stop_model_server(home)


async def test_ten_steps_on_a_real_model(home, client, supervisor, model_url):
    started = time.monotonic()
    run_id = await start_run(home, client, steps=10, pace=0, model=ModelRef(model_url, "smollm2-135m"))
    status = await wait_for_run(home, client, run_id, timeout=600)
    wall = time.monotonic() - started
    snap = build_snapshot(connect(home.db_path), home, run_id)
    notes = [
        r["answer_note"]
        for r in connect(home.db_path).execute("SELECT answer_note FROM steps WHERE run_id=?", (run_id,))
    ]
    providers = sorted({s.provider for s in snap.steps})
    repaired = sum("repaired" in (n or "") for n in notes)
    reprompted = sum("reprompted" in (n or "") for n in notes)
    at_once = sum((n or "").split("; ")[-1] == "json" and "reprompted" not in (n or "") for n in notes)
    print(f"\nreal model: {status} in {wall:.1f} s ({wall / 10:.2f} s/step); providers {providers}")
    print(f"answers: {notes}")
    print(f"valid JSON at once: {at_once}/{len(notes)}; needed repair: {repaired}, re-prompted: {reprompted}")
    assert status == "COMPLETED"
    assert all(s.provider and s.provider.endswith("/smollm2-135m") for s in snap.steps)
    assert all(s.tokens and s.tokens > 0 for s in snap.steps)
    assert snap.duplicates == 0 and snap.outbox_lines == 10
