"""`checkpoint-tui --verify --json` end to end against the real dev server, for both workloads (our loop,
and a user's workflow on the example project's worker: the `lab` fixture), on both ledgers."""

from __future__ import annotations

import json

from bundle_checks import assert_bundle, assert_junit_matches
from checkpoint_tui.proof.report import Report
from conftest import run_cli

EXPECTED_LOOP = [
    "1. worker really dies: SIGKILL, no exit code, confirmed",
    "1b. killed pids are gone from the process table",
    "1c. a different worker pid finished the run",
    "1d. ledger exactly-once",
    "2. retried step shows attempt >= 2, no duplicate effect",
    "3. crash in the claim->stamp window is recovered",
    "3b. file bytes identical to the ledger payload",
    "4. garbled model output fails fast with the guardrail",
    "4b. raw output stored on the step row (<= 500 chars)",
    "4c. no effects for the failed step, earlier steps intact",
    "5. supervisor process SIGKILLed, its worker survived",
    "5b. a new supervisor adopted the same worker",
    "5c. ledger exactly-once",
    "6. unassisted restart (heartbeat timeout only) within 2.5 s",
    "7. completed step count equals the target in every scenario",
]


def failing_lines(stdout: str) -> str:
    """The FAIL lines of a --verify report, whole (its figures), ahead of the output's tail."""
    return "".join(line + "\n" for line in stdout.splitlines() if line.lstrip().startswith("FAIL"))


def assert_verified(out, report: dict) -> None:
    """Every check passed its gate and --verify exited 0. A latency target missed beside other labs on
    two cores is said (SLOW, `met` false) but does not gate without --strict-latency; the figures must
    still show each kill was failed over well inside the 3 min start-to-close."""
    missed = [c for c in report["checks"] if not c["ok"]]
    assert not missed and out.returncode == 0, failing_lines(out.stdout) + out.stdout[-3000:] + out.stderr[-2000:]
    slow = [c for c in report["checks"] if not c["met"]]
    assert all(c["latency"] for c in slow) and report["slow"] == [c["name"] for c in slow], slow
    assert all(("SLOW  " + c["name"]) in out.stdout for c in slow)
    for c in report["checks"]:  # every kill was failed over and its run went on: the figures exist
        if c["name"].startswith("1e. "):  # (3.6 s seen for a restart beside two other labs on two cores)
            assert c["numbers"]["restart_s"] < 10 and c["numbers"]["next_step_excess_s"] is not None, c


EXPECTED = {
    "agent-loop": EXPECTED_LOOP,
    "workflow": [
        "1. worker really dies: SIGKILL, no exit code, confirmed",
        "1b. another worker finished the run",
        "1d. COMPLETED, nothing lost, duplicated or at risk",
        "2. supervisor process SIGKILLed, its worker survived",
        "2b. a new supervisor adopted the same worker",
        "2c. COMPLETED, nothing lost, duplicated or at risk",
        "3b. COMPLETED, nothing lost, duplicated or at risk",
        "4. every recorded history replays on the worker's current code",
        "4b. no workflow task failed during the runs",
    ],
}


def verify(lab, home, *more: str, env: dict | None = None):
    """--verify of the lab's workload on the session's dev server; (its stdout/exit, its JSON report)."""
    out_path = home.home / "verify.json"
    try:
        out = run_cli(
            *lab.flags(home.home, address=home.temporal_address),
            *lab.verify_flags(),
            "--verify",
            "--json",
            str(out_path),
            *more,
            env=env,
            timeout=240,
        )
    finally:
        lab.stop(home.home / "run" / "verify")  # nothing of the verify home is left running
        lab.stop(home.home)
    return out, json.loads(out_path.read_text())


def test_verify_passes_with_figures(lab, home, request):
    """Our loop's on a PostgreSQL ledger (the URL reaches the CLI through its env var), a user's
    workflow's on SQLite: one --verify each (a minute of the suite's twelve), both backends proved."""
    junit, bundle = home.home / "ci" / "verify.xml", home.home / "proof"
    env = {"CHECKPOINT_LEDGER_URL": request.getfixturevalue("pg_url")} if lab.kind == "agent-loop" else None
    out, report = verify(lab, home, "--junit", str(junit), *(["--proof", str(bundle)] if lab.bundles else []), env=env)
    assert_verified(out, report)
    if env is not None:
        assert not (home.run_dir / "verify" / "run" / "checkpoint.db").exists()  # nothing went to SQLite
    assert_junit_matches(junit, report["checks"])
    by_name = {c["name"]: c for c in report["checks"]}
    for name in EXPECTED[lab.kind]:
        assert name in by_name, f"missing check {name!r}"
        assert by_name[name]["ok"], by_name[name]
    assert ("ALL CHECKS PASS" in out.stdout) == (report["passed"] == report["total"])
    assert report["runs"] and report["verify_wall_s"] > 0  # every run it started, in order
    junit_text = junit.read_text()
    assert "checkpoint-tui --verify" in junit_text and ("--workflow" in junit_text) == (lab.kind == "workflow")
    if lab.bundles:
        assert assert_bundle(bundle, report["checks"]) == report["runs"] and len(report["runs"]) == 6
        assert any("restart" in k for k in report) and any("next_step" in k for k in report)
        assert report["restart_latency_s"] < 10
        assert report["unassisted_restart_latency_s"] < 10  # the 2 s heartbeat timeout, not the 3 min start-to-close
    else:  # the unassisted kill is bounded by the killed activity's own heartbeat timeout (the example's 2 s)
        unassisted = next(c for c in report["checks"] if c["name"].startswith("3. unassisted kill"))
        assert "own heartbeat timeout" in unassisted["name"] and "send_line" in unassisted["observed"]
        assert report["passed"] == report["total"] == 13 and len(report["runs"]) == 3


def test_a_missed_latency_target_is_said_but_gates_only_when_strict(capsys):
    """A loaded CI machine is slow, not wrong: a latency check over its target passes as SLOW (met
    false, in the report's `slow`), and fails only under --strict-latency; a plain check always gates."""
    lenient, strict = Report(), Report(strict_latency=True)
    for report in (lenient, strict):
        report.latency_check("1e. kill #1: restart in time", False, "restart=2.360s (≤0.2s)", restart_s=2.36)
        report.latency_check("6. unassisted restart", True, "restart=1.1s")
        report.check("1d. nothing lost", True, "ok")
    said = capsys.readouterr().out
    assert "SLOW  1e. kill #1" in said and "FAIL  1e. kill #1" in said and "reported, not gating" in said
    assert not lenient.failures and [c.name for c in lenient.slow] == ["1e. kill #1: restart in time"]
    assert [c.name for c in strict.failures] == ["1e. kill #1: restart in time"] and not strict.slow
    assert lenient.checks[0].latency and not lenient.checks[0].met and lenient.checks[0].ok
    gate = Report()
    gate.check("1d. nothing lost", False, "1 duplicate")
    assert [c.name for c in gate.failures] == ["1d. nothing lost"]
