"""Crash points that are certain (#48, proof/nemeses/hop.py) where timing cannot reach: a workflow of
instant activities, and one whose activities run in child workflows three levels down (continue-as-new
in the middle). Every aimed kill lands inside an activity, and the audit (which reads the children's
histories too) judges what ran again by the file the sends land in."""

from __future__ import annotations

import json
from itertools import count

import pytest

from test_user_workflow_chaos import chaos
from test_user_workflow_lab import lab_flags

_homes = count()


@pytest.mark.parametrize(("workflow", "pace"), [("SendLinesIdempotent", 0), ("SendLinesNested", 0.05)])
def test_every_aimed_kill_lands_inside_an_activity(workflow, pace, session_root):
    home = session_root / f"crash-{workflow}-{next(_homes)}"
    home.mkdir(parents=True)
    out, report = chaos(
        [*lab_flags(home), "--effects", f"file:{home}/example-out"],
        home,
        "--workflow",
        workflow,
        "--input",
        json.dumps({"count": 6, "pace": pace}),
        "--seed",
        "4",
        "--kills",
        "3",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    # the crash point always lands; the dev server's and the supervisor's kills wait on history, and a run of
    # instant activities may be over before they come: then they are said not fired, never counted
    assert all(n["nemesis"] in ("temporal-server", "supervisor") and "closed" in n["why"] for n in report["not_fired"])
    [crash] = [k for k in report["kills"] if k["kind"] == "worker-after-effect"]
    assert crash["landed"] == "inside" and crash["label"] == "send_line_idempotent"
    assert audit["activities"] == audit["completed"] == 6  # the nested one's are its great-grandchild's
    # the crash point's activity ran again, its effect once; the dev server's kill can re-run the activity
    # in flight as it lands (its completion lost: seen once beside a full suite at pace 0), also effect once
    assert crash["activity_id"] in [r["activity_id"] for r in audit["effect_once"]] and audit["at_risk"] == []
    lines = [line for f in (home / "example-out").iterdir() for line in f.read_text().splitlines()]
    assert len(lines) == len(set(lines)) == 6


def test_a_crash_point_lands_on_a_lab_a_start_left_running(session_root):
    """`start` leaves its workers polling Temporal directly, around the hop chaos starts later: no crash
    point could land on them. Chaos replaces them, says so, and the crash point lands inside."""
    from conftest import run_cli

    home = session_root / f"crash-after-start-{next(_homes)}"
    home.mkdir(parents=True)
    flags = [*lab_flags(home), "--effects", f"file:{home}/example-out"]
    inp = json.dumps({"count": 6, "pace": 0})
    start = run_cli(*flags, "start", "--workflow", "SendLinesIdempotent", "--input", inp, "--wait", timeout=120)
    assert start.returncode == 0, start.stdout[-2000:] + start.stderr[-2000:]
    out, report = chaos(flags, home, "--workflow", "SendLinesIdempotent", "--input", inp, "--seed", "4", "--kills", "3")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "chaos: stopped the lab's workers (active " in out.stdout and "they reach Temporal directly" in out.stdout
    [crash] = [k for k in report["kills"] if k["kind"] == "worker-after-effect"]
    assert crash["landed"] == "inside" and report["audit"]["effect_once"]
