"""Chaos across every process, and the naive loop beside the durable one."""

from __future__ import annotations

import json

from bundle_checks import assert_bundle, assert_junit_matches
from checkpoint_tui.app.comparison import read_comparison
from checkpoint_tui.proof.chaos import REQUIRED, make_schedule
from checkpoint_tui.proof.compare import compare_command
from checkpoint_tui.settings import Settings
from conftest import run_cli


def test_schedule_is_reproducible_and_covers_every_process():
    a = make_schedule(42, 30, 10)
    assert a == make_schedule(42, 30, 10)
    assert a != make_schedule(43, 30, 10)
    kinds = {e.kind for e in a}
    assert set(REQUIRED) <= kinds and len(a) == 10
    assert all(2 <= e.step < 30 for e in a) and len({e.step for e in a}) == 10


def test_short_chaos_schedule_loses_and_duplicates_nothing(session_root):
    home = Settings(home=session_root / "chaos-home")  # its own dev server: chaos kills it
    try:
        junit, bundle = home.home / "chaos.xml", home.home / "proof"
        out = run_cli("chaos", "--seed", "3", "--steps", "12", "--kills", "6", "--junit", str(junit),
                      "--proof", str(bundle), home=home, timeout=240)  # fmt: skip
        report = json.loads((home.run_dir / "chaos-seed3.json").read_text())
    finally:
        run_cli("stop", home=home)
    # the JUnit file and the bundle count what the JSON report counts; its histories (SIGKILLs inside
    # activities, in the claim window, of the dev server) replay with no server running
    assert [c["ok"] for c in report["checks"]] == [True] * 4
    assert_junit_matches(junit, report["checks"])
    assert assert_bundle(bundle, report["checks"]) == [report["audit"]["run_id"]]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED"
    assert (audit["lost"], audit["duplicated"], audit["step_gaps"]) == (0, 0, [])
    kinds = {k["kind"] for k in report["kills"]}
    assert {"supervisor", "temporal-server"} <= kinds and len(report["kills"]) >= 5
    assert audit["interrupted"] >= 1 and audit["recovered"] >= 1  # the claim-window crash was finished
    assert "seed=3" in out.stdout and "LOST 0 · DUPLICATED 0" in out.stdout


async def test_naive_sends_twice_durable_once(home):
    code = await compare_command(home, steps=5, kill_step=3, pace=0.1)
    c = read_comparison(home)
    assert c is not None
    assert c.naive.repeated >= 1 and c.naive.emails > 5  # the restart re-sent emails 1..3
    assert c.durable.emails == 5 and c.durable.repeated == 0 and c.durable.ledger_duplicates == 0
    assert code == 0
    run_cli("stop", home=home)
