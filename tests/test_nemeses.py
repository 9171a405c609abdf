"""Nemeses beyond SIGKILL under real chaos runs: a pause (SIGSTOP, SIGCONT; the watchdog held off), a
hang (SIGSTOP; the watchdog kills), a schedule from a file, and a real shrink of a failing one."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.procs import ProcIdentity
from checkpoint_tui.proof.chaos.schedule import FORGE, PARTITION, load_schedule, make_schedule
from checkpoint_tui.settings import Settings
from conftest import run_cli


@pytest.fixture(scope="module")
def chaos_home(session_root) -> Iterator[Settings]:
    home = Settings(home=session_root / "nemesis-home")  # its own dev server: chaos may kill it
    home.ensure_dirs()
    yield home
    run_cli("stop", home=home)


def test_pause_and_hang_lose_and_duplicate_nothing(chaos_home):
    home, path = chaos_home, chaos_home.home / "pause-hang.json"  # the hang stops the paused worker again
    events = [
        {"at_step": 2, "nemesis": "pause", "delay_ms": 20, "duration_s": 2.5},  # past the 2 s heartbeat timeout
        {"at_step": 4, "nemesis": "hang", "delay_ms": 20},
    ]
    path.write_text(json.dumps({"steps": 6, "seed": 99, "events": events}))
    out = run_cli("chaos", "--schedule", str(path), "--json", str(home.home / "r.json"), home=home, timeout=120)
    report = json.loads((home.home / "r.json").read_text())
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert report["schedule"] == [{**e, "target": "worker"} for e in events]  # rerun exactly as written
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED"
    assert (audit["lost"], audit["duplicated"], audit["step_gaps"]) == (0, 0, [])
    pause, hang = report["pauses"]
    assert pause["kind"] == "pause" and pause["cont_at"] - pause["at"] >= 2.5
    assert 2.5 <= pause["stalled_s"] <= 8.0, pause  # stalled while stopped, then went on with the same worker
    assert hang["watchdog"].startswith("hung: stopped (SIGSTOP) for ") and 1.0 <= hang["killed_at"] - hang["at"] <= 2.5
    assert hang["stalled_s"] <= 4.0, hang
    left = ProcIdentity.of(hang["pid"])
    assert left is None or "checkpoint_tui.worker" not in left.cmdline, "the stopped worker was left behind"
    assert set(report["nemeses"]) == {"pause", "hang"} and report["nemeses"]["hang"]["count"] == 1
    conn = connect(home.db_path)
    kills = conn.execute("SELECT at FROM worker_events WHERE event = 'kill' AND pid = ?", (pause["pid"],)).fetchall()
    assert all(k["at"] >= hang["at"] for k in kills), "the watchdog killed a worker held off for a pause"
    assert "pause" in out.stdout and "LOST 0 · DUPLICATED 0" in out.stdout


def test_shrink_finds_the_one_event_that_breaks_the_run(chaos_home):
    home, path = chaos_home, chaos_home.home / "broken.json"
    path.write_text(
        json.dumps(
            {
                "steps": 4,
                "events": [
                    {"at_step": 2, "nemesis": "worker-in-timer", "delay_ms": 30},
                    {"at_step": 3, "nemesis": FORGE},  # the stand-in for a broken build: a second email line
                ],
            }
        )
    )
    out = run_cli("chaos", "--shrink", str(path), home=home, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    events, steps, _ = load_schedule(home.home / "broken.min.json")
    assert steps == 4 and [(e.step, e.kind) for e in events] == [(3, FORGE)]
    assert "shrink: 2 -> 1 event(s) in 3 runs" in out.stdout


def run_clean_schedule(home: Settings, name: str, events: list[dict], *flags: str, steps: int = 7) -> dict:
    """Run a schedule file of `steps` steps in `home` (with extra global flags); assert it completed
    with nothing lost or duplicated and no gap; return the report. The home's processes are stopped
    afterwards."""
    home.ensure_dirs()
    path = home.home / f"{name}.json"
    path.write_text(json.dumps({"steps": steps, "seed": 7, "events": events}))
    try:
        out = run_cli(
            *flags, "chaos", "--schedule", str(path), "--json", str(home.home / "r.json"), home=home, timeout=150
        )
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
        assert "LOST 0 · DUPLICATED 0" in out.stdout
        report = json.loads((home.home / "r.json").read_text())
        audit = report["audit"]
        assert audit["workflow_status"] == "COMPLETED"
        assert (audit["lost"], audit["duplicated"], audit["step_gaps"]) == (0, 0, [])
        return report
    finally:
        run_cli(*flags, "stop", home=home)


def test_a_mixed_schedule_with_a_partition_keeps_exactly_once_on_a_postgresql_ledger(session_root, pg_url):
    """The same nemeses against a shared PostgreSQL ledger: a kill inside an activity, a pause past the
    heartbeat timeout, a partition from Temporal, a hang the watchdog ends. Its own home: chaos's
    workers are the PostgreSQL home's."""
    home = Settings(home=session_root / "nemesis-pg-home")
    events = [
        {"at_step": 2, "nemesis": "worker-in-activity", "delay_ms": 20},
        {"at_step": 3, "nemesis": "pause", "delay_ms": 20, "duration_s": 2.2},
        {"at_step": 4, "nemesis": "partition", "delay_ms": 20, "duration_s": 2.5},
        {"at_step": 5, "nemesis": "hang", "delay_ms": 20},
    ]
    run_id = run_clean_schedule(home, "mixed", events, "--ledger", pg_url)["audit"]["run_id"]
    row = connect(pg_url).execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    assert row["status"] == "completed"  # the run and its effects really are in PostgreSQL
    assert not home.db_path.exists() or connect(home.db_path).execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_a_seeded_partition_and_a_time_placed_one_keep_exactly_once(session_root):
    """The short mixed schedule on SQLite (PostgreSQL: the test above): `--pauses 1 --partitions 1`'s
    schedule (the seed's claim-window, supervisor and dev-server kills stay where they were; a 1.85 s
    pause; a 2.32 s partition) plus a partition placed by time, past the heartbeat timeout: both cut
    the workers off from Temporal; the run completes with nothing lost or duplicated, and each
    partition's stall is in the report."""
    seeded = make_schedule(5, 7, 3, pauses=1, partitions=1)
    assert [e for e in seeded if e.kind != PARTITION] == make_schedule(5, 7, 3, pauses=1)
    assert {e.kind for e in seeded} >= {"claim-window-crash", "pause", PARTITION}
    timed = {"at_s": 1.0, "nemesis": PARTITION, "target": "network", "delay_ms": 0, "duration_s": 2.5}
    events = [e.to_json() for e in seeded] + [timed]
    # two steps past the seed's seven: a step event waits while a time event fires (schedule.execute),
    # so on a loaded machine the step-6 partition can fire a step late; it must still have a step to stall
    report = run_clean_schedule(Settings(home=session_root / "nemesis-timed-home"), "timed", events, steps=9)
    assert report["schedule"] == events  # step events by step, then the time event: rerun exactly as written
    cuts = {("at_s" in p): p for p in report["pauses"] if p["kind"] == PARTITION}
    assert set(cuts) == {False, True} and not report["not_fired"], (report["pauses"], report["not_fired"])
    at_time = cuts[True]
    assert 1.0 <= at_time["fired_s"] <= 1.6 and at_time["at_s"] == 1.0, at_time  # at its time, not at a step
    # each cut lasted its duration and stalled the run at least that long; on a loaded machine the
    # schedule can fall behind the run, and a cut that fires after the run's last activity started
    # has nothing to stall (stalled_s None): only the later of the two may be that one
    stalled = [c for c in cuts.values() if c["stalled_s"] is not None]
    assert stalled and all(c["at"] >= max(s["at"] for s in stalled) for c in cuts.values() if c not in stalled), cuts
    for cut in cuts.values():
        assert cut["healed_at"] - cut["at"] >= cut["duration_s"], cut
    for cut in stalled:
        assert cut["stalled_s"] >= cut["duration_s"] and 0 <= cut["recovery_s"] <= 5.0, cut  # heal -> next activity
    figures = report["nemeses"][PARTITION]
    assert figures["count"] == 2 and figures["median_recovery_s"] is not None
    assert figures["max_stall_s"] >= max(c["duration_s"] for c in stalled)
    print(
        "partitions (s, stalled, recovery):",  # a cut that stalled nothing has None for both
        [
            (
                c["duration_s"],
                c["stalled_s"] and round(c["stalled_s"], 2),
                c["recovery_s"] and round(c["recovery_s"], 2),
            )
            for c in cuts.values()
        ],
    )
