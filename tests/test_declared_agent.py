"""Any other framework, or a hand-rolled agent, in one declaration (#38): `--model-activities GLOB` /
`--tool-activities GLOB` (or `[tool.checkpoint-tui]` in the worker project's pyproject.toml) class its
activities, so a kill in a model request is reported apart and a re-run tool without a claim is at
risk, named by its activity type. Here the OpenAI Agents mailer, declared rather than recognised."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from checkpoint_tui.cli.workload_flags import declaration
from checkpoint_tui.errors import UsageError
from checkpoint_tui.frameworks import ActivitySeen, Declared, classify
from checkpoint_tui.frameworks.declared import check_glob
from conftest import run_cli
from test_agents_lab import lab, sent
from test_user_workflow_lab import stop_lab

DECLARED = ["--model-activities", "invoke_model_*", "--tool-activities", "send_email*"]


def seen(kind: str, args: list | None = None, result: object = None) -> ActivitySeen:
    return ActivitySeen(kind, args or [], result, None)


def test_a_declaration_classes_by_glob_and_leaves_the_rest_other() -> None:
    d = Declared(model=("invoke_model_*",), tool=("send_*",))
    units = classify(
        d,
        [
            seen("invoke_model_activity", result={"usage": {"input_tokens": 3, "output_tokens": 4}}),
            seen("send_email", ["a@b", "hi"]),
            seen("audit_log"),
            seen("x" * 10**6),
        ],
    )
    assert [u.cls for u in units] == ["model", "tool", "other", "other"]
    assert units[0].tokens == 7 and units[1].name == "send_email" and units[1].args_digest
    assert units[1].label == "tool · send_email" and len(units[3].label) <= 200
    for bad in ("", "a\nb", "x" * 201, "\x1b[31m"):
        with pytest.raises(ValueError):
            check_glob(bad)


def test_the_declaration_comes_from_the_flags_else_the_projects_pyproject(tmp_path, monkeypatch) -> None:
    from argparse import Namespace

    monkeypatch.chdir(tmp_path)
    none = Namespace(model_activities=None, tool_activities=None)
    assert declaration(none) is None  # no flags, no pyproject.toml
    (tmp_path / "pyproject.toml").write_text(
        '[tool.checkpoint-tui]\nmodel-activities = ["llm_*"]\ntool-activities = "do_*"\n'
    )
    assert declaration(none) == Declared(("llm_*",), ("do_*",))
    flags = Namespace(model_activities=["m"], tool_activities=None)
    assert declaration(flags) == Declared(("m",), ())  # the flags win
    (tmp_path / "pyproject.toml").write_text("[tool.checkpoint-tui\n")
    with pytest.raises(UsageError, match="not TOML"):
        declaration(none)
    (tmp_path / "pyproject.toml").write_text("[tool.checkpoint-tui]\nmodel-activities = {a = 1}\n")
    with pytest.raises(UsageError, match="lists of globs"):
        declaration(none)


@pytest.mark.parametrize("workflow", ["OpenAIMailerGuarded", "OpenAIMailer"])
def test_a_declared_agent_gets_the_same_verdicts(workflow, session_root, temporal_address):
    home = session_root / f"declared-{workflow}"
    where = ["--temporal-address", temporal_address]
    report_path = home / "chaos.json"
    try:
        out = run_cli(
            *lab("openai-agents", home, address=temporal_address),
            *DECLARED,
            "chaos",
            "--workflow",
            workflow,
            "--input",
            json.dumps({"turns": 4, "pace": 0.3, "think": 0.2}),
            "--seed",
            "3",
            "--kills",
            "3",
            "--aim",
            "tool",
            "--json",
            str(report_path),
            timeout=240,
        )
        report = json.loads(report_path.read_text())
        if workflow.endswith("Guarded"):  # #51 item 5: status and doctor read a recorded run as declared
            swapped = ["--model-activities", "send_email*", "--tool-activities", "invoke_model_*"]
            status = run_cli("--home", str(home), *where, *swapped, "status", report["run_id"], "--json")
            doctor = run_cli(
                "--home", str(home), *where, *swapped, "doctor", report["run_id"], "--json", str(home / "d.json")
            )
    finally:
        stop_lab(home)
    if workflow.endswith("Guarded"):
        assert status.returncode == 0, status.stdout[-2000:] + status.stderr[-2000:]
        said = json.loads(status.stdout)["audit"]
        assert (said["tool_calls"], said["model_requests"]) == (5, 4), said  # as declared, not as recognised
        assert doctor.returncode in (0, 1) and "Traceback" not in doctor.stderr, doctor.stderr[-2000:]
        classes = {t["activity_type"]: t["class"] for t in json.loads((home / "d.json").read_text())["activity_types"]}
        assert classes["invoke_model_activity"] == "tool" and classes["send_email_guarded"] == "model", classes
    audit = report["audit"]
    assert (audit["tool_calls"], audit["model_requests"]) == (4, 5), audit  # classed by the declaration
    emails = sent(home, report["run_id"])
    if workflow.endswith("Guarded"):
        assert out.returncode == 0 and audit["at_risk"] == [], out.stdout[-3000:]
        assert Counter(emails.values()) == Counter({1: 4})
    else:  # a kill inside the blind tool re-ran it: at risk, named by its activity type
        reran = [k for k in report["kills"] if k.get("landed") == "inside"]
        assert bool(audit["at_risk"]) == bool(reran), (audit["at_risk"], report["kills"])
        assert all(r["class"] == "tool" and r["tool"] == "send_email" for r in audit["at_risk"])
        if audit["at_risk"]:
            assert out.returncode == 1 and "AT RISK" in out.stdout


def test_a_node_project_declares_in_its_package_json(tmp_path, monkeypatch) -> None:
    """#50: declarations lived only in pyproject.toml, a file a node project does not have. package.json's
    "checkpoint-tui" object serves (pyproject.toml's table first, where both are); a hostile package.json
    is one line, exit 2."""
    import os
    from argparse import Namespace

    monkeypatch.chdir(tmp_path)
    none = Namespace(model_activities=None, tool_activities=None)
    package = tmp_path / "package.json"
    package.write_text(
        json.dumps({"name": "m", "checkpoint-tui": {"model-activities": ["think"], "tool-activities": "send*"}})
    )
    assert declaration(none) == Declared(("think",), ("send*",))
    (tmp_path / "pyproject.toml").write_text('[tool.checkpoint-tui]\nmodel-activities = ["llm_*"]\n')
    assert declaration(none) == Declared(("llm_*",), ())  # pyproject.toml's table first
    (tmp_path / "pyproject.toml").unlink()
    package.write_text(json.dumps({"name": "m"}))
    assert declaration(none) is None
    for hostile, said in [
        ("{not json", "not JSON"),
        ("[" * 200 + "]" * 200, "nests deeper"),
        (json.dumps({"checkpoint-tui": ["think"]}), "is not an object"),
        (json.dumps({"checkpoint-tui": {"tool-activities": {"a": 1}}}), "lists of globs"),
        (json.dumps({"checkpoint-tui": {"tool-activities": ["\x1b[2J"]}}), "package.json"),
    ]:
        package.write_text(hostile)
        with pytest.raises(UsageError, match=said):
            declaration(none)
    package.unlink()
    os.mkfifo(package)  # not a regular file: no project file there, nothing declared, nothing waited on
    assert declaration(none) is None
