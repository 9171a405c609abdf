"""Chaos and game day on a server the lab did not start (`--temporal-address`: here the session's dev
server, which this home did not start and must not touch): the seeded schedule kills no server, a
schedule file that would is refused before anything starts, the report says which cluster it ran
against, and `stop` leaves the server running."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from checkpoint_tui.ops.devserver import recorded
from checkpoint_tui.proof.chaos.schedule import make_schedule
from checkpoint_tui.proof.chaos.workflow_schedule import workload_schedule
from checkpoint_tui.proof.nemeses.hop import AFTER
from checkpoint_tui.settings import Settings
from conftest import run_cli
from labs import LABS


def test_a_seed_draws_the_same_schedule_on_a_server_the_lab_did_not_start_but_for_the_server_kill():
    for seed in range(1, 30):
        ours, theirs = make_schedule(seed, 14, 6, pauses=2), make_schedule(seed, 14, 6, pauses=2, server=False)
        assert "temporal-server" in [e.kind for e in ours]
        assert theirs == [e for e in ours if e.kind != "temporal-server"]  # every other event as the seed puts it
        kinds = [e.kind for e in workload_schedule(seed, 3, server=False)[0]]
        assert sorted(kinds) == sorted([AFTER, "supervisor"]), kinds


@pytest.mark.parametrize("lab", ["agent-loop", "workflow"], indirect=True)
def test_chaos_on_a_server_the_lab_did_not_start_kills_no_server_and_says_which(
    lab, session_root: Path, server_home: Settings, temporal_address: str
):
    home = lab.home(session_root, "external")
    server_pid = recorded(server_home)[0].pid  # type: ignore[union-attr]
    path = home / "chaos.json"
    try:
        out = run_cli(
            *lab.flags(home, address=temporal_address),
            "chaos",
            *lab.run_flags(10),
            "--seed",
            "2",
            "--kills",
            "4",
            "--json",
            str(path),
            timeout=240,
        )
    finally:
        stopped = run_cli(*lab.flags(home, address=temporal_address), "stop")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    report = json.loads(path.read_text())
    assert report["temporal"] == {"address": temporal_address, "namespace": "default", "started_by_lab": False}
    assert f"temporal {temporal_address} (namespace default, a server the lab did not start)" in out.stdout
    kinds = [e["nemesis"] for e in report["schedule"]]
    assert "temporal-server" not in kinds and "supervisor" in kinds and len(kinds) == 3, kinds  # 4 less the server
    assert report["audit"]["workflow_status"] == "COMPLETED" and all(c["ok"] for c in report["checks"])
    assert not (home / "run" / "devserver.json").exists()  # none started in the home
    assert "dev server" not in stopped.stdout and psutil.pid_exists(server_pid)  # stop left it alone


def test_a_schedule_file_that_kills_the_server_is_refused_there_before_anything_starts(
    session_root: Path, temporal_address: str
):
    lab = LABS["workflow"]
    home = lab.home(session_root, "external-refused")
    schedule = session_root / f"{home.name}.json"
    schedule.write_text(json.dumps({"events": [{"at_s": 1.0, "nemesis": "temporal-server", "delay_ms": 0}]}))
    out = run_cli(*lab.flags(home, address=temporal_address), "chaos", *lab.run_flags(4), "--schedule", str(schedule))
    assert out.returncode == 2, out.stdout + out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert f"{schedule}: the event at 1 s kills the dev server" in line and temporal_address in line, line
    assert not (home / "run" / "worker.json").exists() and not (home / "run" / "devserver.json").exists()
