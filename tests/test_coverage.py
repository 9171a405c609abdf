"""`chaos --until-covered`: each window of the run produced for real (an aimed kill, or a fault hook
where timing cannot reach it) and classified after the fact from the ledger and the history."""

from __future__ import annotations

import json

from junitparser import JUnitXml

from checkpoint_tui.core import windows as w
from checkpoint_tui.settings import Settings
from conftest import run_cli
from test_user_workflow_lab import WORKER_CMD

# what each fault hook's death must be classified as: exact, since the worker kills itself there
HOOKED = {
    "before-claim-crash": w.BEFORE_CLAIM,
    "claim-window-crash": w.CLAIM_WRITE,
    "write-window-crash": w.WRITE_STAMP,
    "stamped-crash": w.STAMPED,
}


def test_until_covered_hits_every_window_and_each_hook_lands_where_it_aims(session_root):
    home = Settings(home=session_root / "coverage-home")
    report_path, junit = home.home / "r.json", home.home / "r.xml"
    try:
        out = run_cli(
            "chaos",
            "--seed",
            "5",
            "--steps",
            "6",
            "--kills",
            "3",
            "--until-covered",
            "--max-kills",
            "20",
            "--json",
            str(report_path),
            "--junit",
            str(junit),
            home=home,
            timeout=240,
        )
    finally:
        run_cli("stop", home=home)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    report = json.loads(report_path.read_text())
    cov = report["coverage"]
    assert cov["missing"] == [] and cov["rounds"], cov
    assert all(report["windows"].get(name, 0) >= 1 for name in w.COVERAGE), report["windows"]
    assert sum(report["windows"].values()) == len(report["kill_windows"]) == cov["kills"] <= 20
    for rnd in cov["rounds"]:  # each hook crash of an aimed round, at its step, in its window
        by_step = {k["step"]: k["window"] for k in report["kill_windows"] if k["run_id"] == rnd["run_id"]}
        for ev in rnd["schedule"]:
            if ev["nemesis"] in HOOKED:
                assert by_step.get(ev["at_step"]) == HOOKED[ev["nemesis"]], (ev, by_step)
        assert (rnd["audit"]["lost"], rnd["audit"]["duplicated"]) == (0, 0)
    assert all(c["ok"] for c in report["checks"]) and "windows (" in out.stdout
    cases = {case.name for suite in JUnitXml.fromfile(str(junit)) for case in suite}
    assert {f"window: {name}" for name in w.COVERAGE} <= cases
    assert "chaos: every window was hit (--until-covered)" in cases


def test_max_kills_alone_and_until_covered_with_runs_are_usage_errors(tmp_path):
    home = Settings(home=tmp_path / "h")
    user = ["--worker-cmd", WORKER_CMD, "chaos", "--workflow", "SendLines"]
    for argv, said in (
        (["chaos", "--max-kills", "5"], "--max-kills goes with --until-covered"),
        ([*user, "--max-kills", "5"], "--max-kills goes with --until-covered"),
        (["chaos", "--until-covered", "--runs", "2"], "--until-covered goes with"),
        ([*user, "--until-covered", "--runs", "2"], "--until-covered goes with"),
        ([*user, "--until-covered", "--max-kills", "0"], "--max-kills"),
    ):
        out = run_cli(*argv, home=home)
        assert out.returncode == 2 and said in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not home.home.exists()
