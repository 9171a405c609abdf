"""Workflow resets as a nemesis (proof/nemeses/resets.py): `temporal workflow reset` to a workflow task a few
steps back runs those steps again; the ledger skips every effect they had applied. The seeded
generator's `--resets` and `reset` events in schedule files, on both ledger backends."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger.artifacts import outbox_path
from checkpoint_tui.proof.chaos.schedule import load_schedule, make_schedule
from checkpoint_tui.settings import Settings
from conftest import run_cli


def test_resets_come_from_their_own_stream_and_schedule_files_bound_them(tmp_path):
    plain = make_schedule(7, 12, 3)
    with_resets = make_schedule(7, 12, 3, resets=2)
    assert [e for e in with_resets if e.kind != "reset"] == plain  # the seed's kills stay where they were
    resets = [e for e in with_resets if e.kind == "reset"]
    assert len(resets) == 2 and all(1 <= e.back_steps <= 3 and 2 <= e.step < 12 for e in resets)
    assert make_schedule(7, 12, 2, resets=2) == make_schedule(7, 12, 2, resets=2)  # --kills 2 beside resets
    with pytest.raises(UsageError, match="--kills must be at least 3"):
        make_schedule(7, 12, 2)
    path = tmp_path / "s.json"
    for back, said in ((0, "back_steps must be"), (True, "back_steps must be"), (51, "back_steps must be")):
        path.write_text(json.dumps({"steps": 6, "events": [{"at_step": 3, "nemesis": "reset", "back_steps": back}]}))
        with pytest.raises(UsageError, match=said):
            load_schedule(path)
    path.write_text(json.dumps({"steps": 6, "events": [{"at_s": 2.0, "nemesis": "reset"}]}))
    with pytest.raises(UsageError, match="give it at_step"):
        load_schedule(path)
    path.write_text(json.dumps({"steps": 6, "events": [{"at_step": 3, "nemesis": "reset", "target": "worker"}]}))
    with pytest.raises(UsageError, match="targets the workflow"):
        load_schedule(path)
    path.write_text(json.dumps({"steps": 6, "events": [{"at_step": 3, "nemesis": "reset"}]}))
    (ev,), steps, _ = load_schedule(path)
    assert (ev.kind, ev.step, ev.back_steps, ev.target, steps) == ("reset", 3, 2, "workflow", 6)
    assert ev.to_json() == {"at_step": 3, "nemesis": "reset", "target": "workflow", "delay_ms": 0, "back_steps": 2}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_chaos_with_resets_completes_with_every_re_run_effect_skipped(backend, session_root, request):
    """The issue's line: `chaos --seed 7 --steps 12 --kills 2 --resets 2`."""
    home = Settings(home=session_root / f"resets-{backend}")  # its own dev server: chaos kills it
    flags = ["--ledger", request.getfixturevalue("pg_url")] if backend == "postgresql" else []
    report_path = home.home / "r.json"
    try:
        out = run_cli(
            *flags,
            "chaos",
            "--seed",
            "7",
            "--steps",
            "12",
            "--kills",
            "2",
            "--resets",
            "2",
            "--json",
            str(report_path),
            home=home,
            timeout=240,
        )
        report = json.loads(report_path.read_text())
    finally:
        run_cli(*flags, "stop", home=home)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit, resets = report["audit"], report["resets"]
    assert audit["workflow_status"] == "COMPLETED"
    assert (audit["lost"], audit["duplicated"], audit["step_gaps"]) == (0, 0, [])
    assert len(resets) >= 1 and all(r["old_execution"] != r["new_execution"] for r in resets)
    for r in resets:
        assert r["from_step"] <= r["step"] and r["re_ran"], r  # it ran steps again ...
        assert {a["step"] for a in r["re_ran"]} == set(range(r["from_step"], r["step"] + 1))
        assert r["claims_after_reset"].get("applied", 0) == 0  # ... and applied none of their effects again
        assert r["claims_after_reset"].get("skipped", 0) >= 3 * (r["step"] - r["from_step"])
    assert audit["skipped"] >= 3
    run_id = report["run_id"]
    lines = outbox_path(home.artifacts_dir, run_id).read_text().splitlines()
    assert len(lines) == 12 and len(Counter(lines)) == 12  # the outbox holds each of the 12 emails once
    assert "chaos: a reset applies no effect again" in {c["name"] for c in report["checks"]}
    assert all(c["ok"] for c in report["checks"]) and "verdict: PASS" in out.stdout
    assert "reset " in out.stdout and "applied again 0" in out.stdout
