"""The JUnit XML of --verify, chaos and replay: one testcase per check, read back with a JUnit reader
(junitparser) and with the standard library's XML parser (plain valid XML)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from junitparser import Failure, JUnitXml

from checkpoint_tui.proof.chaos.loop_target import audit_checks
from checkpoint_tui.proof.junit import write_junit
from checkpoint_tui.proof.report import Check

CHECKS = [
    Check("1. worker really dies", True, "pid=4121 signal=SIGKILL exit_code=none", {"restart_s": 0.14}),
    Check("2. retried step", False, "step 2: attempt=1 effects=4 uniqueIds=3", {"attempt": 1, "note": None}),
    Check("3. odd text <&> \x07 survives", True, 'raw="[bold]x[/]" \x1b[0m'),
]


def read_back(path):
    """(cases, failures) per junitparser and per xml.etree, each a list of (name, failure message, text)."""
    cases = []
    for suite in JUnitXml.fromfile(str(path)):
        for case in suite:
            failure = next((r for r in case.result if isinstance(r, Failure)), None)
            cases.append((case.name, failure.message if failure else None, case.system_out))
    root = ET.parse(path).getroot()
    etree_cases = [
        (
            c.get("name"),
            c.find("failure").get("message") if c.find("failure") is not None else None,
            c.findtext("system-out"),
        )
        for c in root.iter("testcase")
    ]
    return cases, etree_cases, root


def test_one_testcase_per_check_and_failures_carry_observed_values(tmp_path):
    path = write_junit(tmp_path / "out" / "junit.xml", "checkpoint-tui --verify", CHECKS, {"restart_s": 0.14}, 12.5)
    cases, etree_cases, root = read_back(path)
    assert cases == etree_cases and len(cases) == len(CHECKS)
    assert root.tag == "testsuites" and root.get("tests") == "3" and root.get("failures") == "1"
    suite = root.find("testsuite")
    assert suite.get("name") == "checkpoint-tui --verify" and suite.get("time") == "12.5"
    assert {p.get("name"): p.get("value") for p in suite.iter("property")} == {"restart_s": "0.14"}
    failed = [c for c in cases if c[1] is not None]
    assert [c[0] for c in failed] == ["2. retried step"]
    name, message, out = failed[0]
    assert "attempt=1 effects=4 uniqueIds=3" in message  # the observed values, in the failure itself
    assert "attempt=1 effects=4" in out and '"attempt": 1' in out and "note" not in out
    failure = root.find(".//testcase[@name='2. retried step']/failure")
    assert failure.get("type") == "CheckFailed" and "uniqueIds=3" in failure.text
    odd = next(c for c in cases if c[0].startswith("3."))
    assert "<&>" in odd[0] and "\x07" not in odd[0] and "[bold]x[/]" in odd[2]  # escaped, control chars replaced


def test_chaos_checks_pass_exactly_when_the_audit_does():
    audit = {
        "workflow_status": "COMPLETED",
        "total_steps": 12,
        "step_gaps": [],
        "lost": 0,
        "duplicated": 0,
        "claims_attempted": 37,
        "applied": 36,
        "skipped": 0,
        "recovered": 1,
        "interrupted": 1,
        "lost_detail": [],
        "duplicated_detail": [],
    }
    assert all(c.ok for c in audit_checks(audit))
    bad = {**audit, "lost": 1, "lost_detail": ["run-x:4:email: outbox line missing"], "step_gaps": [4]}
    checks = audit_checks(bad)
    assert [c.name for c in checks if not c.ok] == ["chaos: no lost effect", "chaos: no step gaps"]
    lost = next(c for c in checks if c.name == "chaos: no lost effect")
    assert "lost 1" in lost.observed and "outbox line missing" in lost.observed
