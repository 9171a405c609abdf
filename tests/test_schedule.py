"""Chaos schedules as code: the seeded generator, the file format, and the shrinker's ddmin."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from checkpoint_tui.cli.parser import build_parser
from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.chaos.schedule import (
    PARTITION,
    PAUSES,
    REQUIRED,
    ChaosEvent,
    execute,
    load_schedule,
    make_schedule,
    save_schedule,
)
from checkpoint_tui.proof.chaos.shrink import ddmin
from conftest import run_cli


def test_pauses_leave_a_seeds_kills_where_they_were():
    kills = make_schedule(42, 30, 10)
    both = make_schedule(42, 30, 10, pauses=4)
    assert [e for e in both if e.kind not in PAUSES] == kills
    paused = [e for e in both if e.kind in PAUSES]
    assert len(paused) == 4 and len({e.step for e in both}) == 14
    assert all(0.5 <= e.duration_s <= 3.0 for e in paused if e.kind == "pause")
    assert both == make_schedule(42, 30, 10, pauses=4)


def test_partitions_leave_a_seeds_kills_and_pauses_where_they_were():
    before = make_schedule(42, 40, 10, pauses=4)
    both = make_schedule(42, 40, 10, pauses=4, partitions=6)
    assert [e for e in both if e.kind != PARTITION] == before
    cuts = [e for e in both if e.kind == PARTITION]
    assert len(cuts) == 6 and len({e.step for e in both}) == 20 and all(2 <= e.step < 40 for e in cuts)
    assert all(0.5 <= e.duration_s <= 4.0 for e in cuts) and any(e.duration_s > 2.0 for e in cuts)  # past the 2 s
    assert both == make_schedule(42, 40, 10, pauses=4, partitions=6)  # heartbeat timeout at times
    assert [e.step for e in both] == sorted(e.step for e in both)
    assert make_schedule(43, 40, 10, pauses=4, partitions=6) != both
    with pytest.raises(UsageError, match="--partitions 3 need --steps of at least 12"):
        make_schedule(1, 11, 5, pauses=2, partitions=3)
    args = build_parser().parse_args(["chaos", "--partitions", "2"])
    assert args.partitions == 2 and build_parser().parse_args(["chaos"]).partitions == 0


def test_at_s_events_round_trip_and_sort_after_step_events(tmp_path):
    path = tmp_path / "timed.json"
    path.write_text(
        json.dumps(
            {
                "steps": 8,
                "events": [
                    {"at_s": 12, "nemesis": "pause", "duration_s": 2},
                    {"at_step": 5, "nemesis": "worker-in-timer", "delay_ms": 30},
                    {"at_s": 2.5, "nemesis": PARTITION, "delay_ms": 100, "duration_s": 3.0},
                ],
            }
        )
    )
    events, steps, seed = load_schedule(path)
    assert (steps, seed) == (8, None)
    assert events == [
        ChaosEvent(5, "worker-in-timer", 30),
        ChaosEvent(None, PARTITION, 100, duration_s=3.0, at_s=2.5),
        ChaosEvent(None, "pause", 0, duration_s=2.0, at_s=12.0),
    ]
    assert events[1].due_s == pytest.approx(2.6) and events[1].describe() == "at 2.50 s: partition for 3.00 s +100 ms"
    assert events[1].to_json() == {
        "at_s": 2.5,
        "nemesis": PARTITION,
        "target": "network",
        "delay_ms": 100,
        "duration_s": 3.0,
    }
    save_schedule(tmp_path / "again.json", events, steps, 4)
    assert load_schedule(tmp_path / "again.json") == (events, 8, 4)


BAD_AT_S = [
    ({"at_step": 3, "at_s": 3, "nemesis": "pause"}, "exactly one of at_step and at_s"),
    ({"nemesis": "pause"}, "exactly one of at_step and at_s"),
    ({"at_s": 0, "nemesis": "pause"}, "at_s must be a number of seconds in (0, 3600]"),
    ({"at_s": 3600.5, "nemesis": "pause"}, "at_s must be"),
    ({"at_s": "3", "nemesis": "pause"}, "at_s must be"),
    ({"at_s": True, "nemesis": "pause"}, "at_s must be"),
    ({"at_s": None, "nemesis": "pause"}, "at_s must be"),
    ({"at_s": 2, "nemesis": "claim-window-crash"}, "claim-window-crash names a moment of a step: give it at_step"),
    ({"at_s": 2, "nemesis": "worker-in-activity"}, "names a moment of a step"),
]


@pytest.mark.parametrize(("event", "error"), BAD_AT_S)
def test_bad_at_s_events_are_one_line_usage_errors(tmp_path, event, error):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"steps": 10, "events": [{"at_step": 2, "nemesis": "hang"}, event]}))
    with pytest.raises(UsageError) as err:
        load_schedule(path)
    assert error in str(err.value) and f"{path}: event 1" in str(err.value) and "\n" not in str(err.value)


def test_a_bad_at_s_is_exit_2_on_the_command_line(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"at_s": 4000, "nemesis": PARTITION}]))
    out = run_cli("--home", str(tmp_path / "h"), "chaos", "--schedule", str(path), "--steps", "6")
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "at_s must be a number of seconds in (0, 3600]" in out.stderr
    assert not (tmp_path / "h" / "run" / "devserver.json").exists()  # refused before anything started


async def test_execute_fires_time_events_between_step_events_as_their_times_come():
    """Step events arrive (fake: at a set time), time events fire at theirs: one order, one at a time."""
    started, fired = time.time(), []
    arrives = {2: 0.3, 5: 0.7, 6: None}  # step 6's moment never comes (the run ended first)
    step_events = [ChaosEvent(k, "worker-in-activity", 0) for k in arrives]
    timed = [ChaosEvent(None, "pause", 0, duration_s=1.0, at_s=t) for t in (0.1, 0.5, 30.0)]
    timed.append(ChaosEvent(None, PARTITION, 150, duration_s=1.0, at_s=0.75))  # due at 0.9 (its delay)

    async def arrive(ev: ChaosEvent) -> bool:
        if (at := arrives[ev.step]) is None:
            return False
        await asyncio.sleep(max(0.0, started + at - time.time()))
        return True

    async def strike(ev: ChaosEvent) -> None:
        assert not fired or fired[-1][1] is not None, "one event at a time"
        fired.append((ev, None))
        await asyncio.sleep(0.02)
        fired[-1] = (ev, time.time() - started)

    async def closed() -> bool:
        return time.time() - started > 1.1

    left = await execute([*step_events, *timed], arrive, strike, started, closed)
    order = [(e.step, e.at_s, e.delay_ms) for e, _ in fired]
    assert order == [(None, 0.1, 0), (2, None, 0), (None, 0.5, 0), (5, None, 0), (None, 0.75, 150)]
    assert left == [step_events[2], timed[2]]  # step 6's moment never came; at 30 s the run had closed
    for ev, at in fired:
        if ev.at_s is not None:
            assert ev.due_s <= at < ev.due_s + 0.5, (ev, at)


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
        [ChaosEvent(2, "claim-window-crash", 0, "file"), ChaosEvent(3, "pause", 0, duration_s=1.0)],
        6,
        None,
    )


@pytest.mark.parametrize(
    "events",
    [
        [{"at_step": 3, "nemesis": "nuke"}],
        [{"at_step": 99, "nemesis": "pause"}],
        [{"at_s": 3, "nemesis": "pause"}, {"at_s": 3.0, "nemesis": "hang"}],
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
    out = run_cli(
        "--home",
        str(tmp_path / "h"),
        "chaos",
        "--seed",
        "5",
        "--steps",
        "12",
        "--kills",
        "4",
        "--pauses",
        "2",
        "--save-schedule",
        str(path),
    )
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


async def test_ddmin_shrinks_a_mixed_schedule_of_step_and_time_events(tmp_path):
    timed = [ChaosEvent(None, kind, 0, duration_s=1.5, at_s=t) for kind, t in ((PARTITION, 3.0), ("pause", 9.5))]
    events = [*make_schedule(11, 40, 12, pauses=3, partitions=3), *timed]
    cut = next(e for e in events if e.kind == PARTITION and e.at_s is None)
    culprits = {cut, timed[1]}

    async def fails(candidate: list[ChaosEvent]) -> bool:
        return culprits <= set(candidate)

    smallest = await ddmin(events, fails)
    assert smallest == [cut, timed[1]]  # order kept: the step event, then the time event
    save_schedule(tmp_path / "s.min.json", smallest, 40, 11)
    assert load_schedule(tmp_path / "s.min.json") == (smallest, 40, 11)


async def test_ddmin_keeps_a_single_culprit_and_handles_one_event():
    events = make_schedule(3, 12, 6)

    async def fails(candidate):
        return events[-1] in candidate

    assert await ddmin(events, fails) == [events[-1]]
    assert await ddmin(events[:1], fails) == events[:1]


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({"at_step": True, "nemesis": "pause"}, "at_step must be"),  # Python's bools are ints: true was step 1
        ({"at_step": 3, "nemesis": "pause", "delay_ms": True}, "delay_ms must be"),  # was "+True ms"
        ({"at_step": 3, "nemesis": "pause", "duration_s": True}, "duration_s must be"),
        ({"at_step": 3, "nemesis": "activity-pause", "duration_s": False}, "duration_s must be"),
        ({"at_step": 3, "nemesis": "reset", "back_steps": 2.0}, "back_steps must be"),
        ({"at_step": 3, "nemesis": ["reset"]}, "nemesis must be one of"),  # was a TypeError traceback
        ({"at_step": 3, "nemesis": {"reset": 1}}, "nemesis must be one of"),
        ({"at_step": 3, "nemesis": "reset", "target": "x" * 100_000}, "targets the workflow, not 'xxx"),
    ],
)
def test_a_bool_for_a_number_or_a_nemesis_that_is_not_a_name_is_one_short_usage_error(tmp_path, event, said):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"steps": 6, "events": [event]}))
    with pytest.raises(UsageError, match=said) as err:
        load_schedule(path)
    assert len(str(err.value)) < 500 and "\n" not in str(err.value)  # the nemeses' list alone: 250 characters


@pytest.mark.parametrize("seed", [True, "7", 2**63, -1, 1.5])
def test_a_schedule_seed_is_a_whole_number_or_null(tmp_path, seed):
    """The seed names the report file (run/chaos-seed<S>.json): a 4000-digit one started the lab and then
    failed to write it; true and "7" were taken or silently dropped."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"steps": 6, "seed": seed, "events": [{"at_step": 2, "nemesis": "pause"}]}))
    with pytest.raises(UsageError, match="'seed' must be a whole number"):
        load_schedule(path)
    path.write_text(json.dumps({"steps": 6, "seed": None, "events": []}))
    assert load_schedule(path) == ([], 6, None)


def test_a_schedule_holds_at_most_max_events_seeded_or_from_a_file(tmp_path):
    from checkpoint_tui.proof.chaos.schedule import MAX_EVENTS
    from checkpoint_tui.proof.chaos.workflow_schedule import workload_schedule

    with pytest.raises(UsageError, match=f"add up to {MAX_EVENTS + 1} events; a schedule holds at most {MAX_EVENTS}"):
        make_schedule(1, 100_000, MAX_EVENTS + 1)
    with pytest.raises(UsageError, match="a schedule holds at most"):  # a user's workflow: the span grew with it
        workload_schedule(1, 100_000, 0, 0, 100_000)
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "steps": 100_000,
                "events": [{"at_step": k, "nemesis": "activity-reset"} for k in range(1, MAX_EVENTS + 2)],
            }
        )
    )
    with pytest.raises(UsageError, match=f"{MAX_EVENTS + 1} events; a schedule holds at most {MAX_EVENTS}"):
        load_schedule(path)
    assert len(make_schedule(1, MAX_EVENTS + 2, MAX_EVENTS)) == MAX_EVENTS


def test_a_schedule_without_steps_names_no_flag_for_a_users_workflow(tmp_path):
    """A user's workflow takes no --steps (its schedule file says its own span)."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps([{"at_step": 2, "nemesis": "pause"}]))
    with pytest.raises(UsageError) as err:
        load_schedule(path, None)
    assert "'steps' must be a whole number" in str(err.value) and "--steps" not in str(err.value)
    assert load_schedule(path, 6)[1] == 6


def test_a_schedule_holds_the_run_at_most_an_hour_seeded_or_from_a_file(tmp_path):
    """Each pause or partition may last a minute, and a schedule hold 10,000 events: together a valid
    week of chaos. The held time is bounded as a whole, before anything starts."""
    from checkpoint_tui.proof.chaos.schedule import MAX_EVENTS, MAX_HELD_S

    path = tmp_path / "long.json"
    events = [{"at_step": k, "nemesis": "pause" if k % 2 else PARTITION, "duration_s": 60} for k in range(1, 62)]
    path.write_text(json.dumps({"steps": 100, "events": events}))
    with pytest.raises(UsageError, match=r"hold the run 3,660 s in all; a schedule holds it at most 3,600 s"):
        load_schedule(path)
    path.write_text(json.dumps({"steps": 100, "events": events[:60]}))  # exactly the hour: taken
    assert sum(e.duration_s for e in load_schedule(path)[0]) == MAX_HELD_S
    tenths = [{"at_step": k, "nemesis": "pause", "duration_s": 0.36} for k in range(1, MAX_EVENTS + 1)]
    path.write_text(json.dumps({"steps": MAX_EVENTS, "events": tenths}))  # 3,600 s, inexact in binary
    assert len(load_schedule(path)[0]) == MAX_EVENTS
    # Seeded: the longest the drawn durations could be decides (partitions up to 4 s), whatever the seed
    with pytest.raises(UsageError, match=r"^--partitions 901 could hold the run 3,604 s in all"):
        make_schedule(1, 1_000, 3, partitions=901)
    assert all(len(make_schedule(seed, 1_000, 3, partitions=900)) == 903 for seed in range(5))
    with pytest.raises(UsageError, match=r"^--pauses 1000 --activity-pauses 300 could hold"):
        make_schedule(1, 2_000, 3, pauses=1_000, activity_pauses=300)
    path.write_text(json.dumps({"steps": 100, "events": events}))
    out = run_cli("--home", str(tmp_path / "h"), "chaos", "--schedule", str(path))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "a schedule holds it at most 3,600 s" in out.stderr
    assert not (tmp_path / "h" / "run" / "devserver.json").exists()  # refused before anything started
