"""Chaos schedules as code: the seeded generator, the file format, and the shrinker's ddmin."""

from __future__ import annotations

import json

import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.schedule import (
    PAUSES,
    REQUIRED,
    ChaosEvent,
    load_schedule,
    make_schedule,
    save_schedule,
)
from checkpoint_tui.proof.shrink import ddmin
from conftest import run_cli


def test_pauses_leave_a_seeds_kills_where_they_were():
    kills = make_schedule(42, 30, 10)
    both = make_schedule(42, 30, 10, pauses=4)
    assert [e for e in both if e.kind not in PAUSES] == kills
    paused = [e for e in both if e.kind in PAUSES]
    assert len(paused) == 4 and len({e.step for e in both}) == 14
    assert all(0.5 <= e.duration_s <= 3.0 for e in paused if e.kind == "pause")
    assert both == make_schedule(42, 30, 10, pauses=4)


def test_schedule_file_round_trips(tmp_path):
    events = make_schedule(7, 24, 8, pauses=3)
    path = tmp_path / "s.json"
    save_schedule(path, events, 24, 7)
    assert load_schedule(path) == (events, 24, 7)
    doc = json.loads(path.read_text())
    assert {"at_step", "nemesis", "target", "delay_ms"} <= set(doc["events"][0])
    # a bare list, hand-written, with defaults; --steps applies
    path.write_text(json.dumps([{"at_step": 3, "nemesis": "pause"}, {"at_step": 2, "nemesis": "claim-window-crash"}]))
    assert load_schedule(path, 6) == (
        [ChaosEvent(2, "claim-window-crash", 0, "file"), ChaosEvent(3, "pause", 0, duration_s=1.0)], 6, None,
    )  # fmt: skip


@pytest.mark.parametrize(
    "events",
    [
        [{"at_step": 3, "nemesis": "nuke"}],
        [{"at_step": 99, "nemesis": "pause"}],
        [{"at_s": 3, "nemesis": "pause"}],
        [{"at_step": 3, "nemesis": "pause", "duration_s": -1}],
        [{"at_step": 3, "nemesis": "supervisor", "target": "worker"}],
        [{"at_step": 3, "nemesis": "pause"}, {"at_step": 3, "nemesis": "hang"}],
    ],
)
def test_bad_schedule_files_are_usage_errors(tmp_path, events):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"steps": 10, "events": events}))
    with pytest.raises(UsageError):
        load_schedule(path)


def test_save_schedule_cli_writes_and_does_not_run(tmp_path):
    path = tmp_path / "seed5.json"
    out = run_cli("--home", str(tmp_path / "h"), "chaos", "--seed", "5", "--steps", "12", "--kills", "4",
                  "--pauses", "2", "--save-schedule", str(path))  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert load_schedule(path) == (make_schedule(5, 12, 4, 2), 12, 5)
    assert not (tmp_path / "h" / "run" / "devserver.json").exists()  # nothing was started
    bad = run_cli("--home", str(tmp_path / "h"), "chaos", "--schedule", str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and "cannot read the schedule" in bad.stderr


async def test_ddmin_finds_a_one_minimal_failing_subset():
    events = make_schedule(11, 40, 12)
    culprits = {events[2], events[9]}
    asked: list[list[ChaosEvent]] = []

    async def fails(candidate: list[ChaosEvent]) -> bool:
        asked.append(candidate)
        return culprits <= set(candidate)

    smallest = await ddmin(events, fails)
    assert smallest == [events[2], events[9]]
    assert len(asked) == len({tuple(a) for a in asked}) < 40  # each candidate run once, far fewer than 2^12
    assert set(REQUIRED) <= {e.kind for e in events}


async def test_ddmin_keeps_a_single_culprit_and_handles_one_event():
    events = make_schedule(3, 12, 6)

    async def fails(candidate):
        return events[-1] in candidate

    assert await ddmin(events, fails) == [events[-1]]
    assert await ddmin(events[:1], fails) == events[:1]
