"""A fleet's flags and a game day's schedule events are checked before anything starts (one line, exit
2), the slots name their command and queue (a deploy swaps the command, never the queue), and the
state files the supervisor reads cannot be planted (issue #40)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from checkpoint_tui.cli.parser import build_parser
from checkpoint_tui.cli.workload_flags import fold_fleet
from checkpoint_tui.errors import UsageError
from checkpoint_tui.ops import fleet
from checkpoint_tui.proof.chaos.fleet_events import check_against
from checkpoint_tui.proof.chaos.schedule import load_schedule
from checkpoint_tui.settings import FleetMember, Settings
from conftest import run_cli

PY = sys.executable
WORKER = f"{PY} examples/fleet/activity_worker.py"


BAD_FLAGS = [
    (["--worker", "no-equals-sign"], "takes QUEUE=CMD"),
    (["--worker", "bad queue!=python x.py"], "is not a task queue name"),
    (["--worker", "q=no-such-program-here x"], "is not an executable file"),
    (["--worker", f"q={WORKER}", "--deploy", f"elsewhere={WORKER}"], "no worker command polls elsewhere"),
    (["--worker", f"q={WORKER}", "--deploy", f"q={WORKER}", "--deploy", f"q={WORKER}"], "one --deploy per task queue"),
    (["--worker", f"q={WORKER}", "--dependency", "MAIL_API=203.0.113.9:80"], "loopback"),
    (["--worker", f"q={WORKER}", "--dependency", "PATH=127.0.0.1:80"], "PATH"),
    (["--worker", f"q={WORKER}", "--dependency", "MAIL_API=127.0.0.1:0"], "port must be a number from 1 to 65535"),
    (["--dependency", "MAIL_API=127.0.0.1:80"], "for your own workers"),
    (["--worker", f"a={WORKER}", "--task-queue", "b"], "no --worker polls it"),
]


@pytest.mark.parametrize(("flags", "said"), BAD_FLAGS)
def test_a_bad_fleet_flag_is_refused_by_the_parser_or_the_fleet_check(flags: list[str], said: str, capsys):
    """In-process, as dispatch() checks them before anything starts (the CLI's own exit is tested below)."""
    try:
        args = build_parser().parse_args([*flags, "start", "--workflow", "FleetMailer"])
        fold_fleet(args)
    except SystemExit as exit_:
        assert exit_.code == 2 and said in capsys.readouterr().err
    except UsageError as err:
        assert said in str(err) and "\n" not in str(err)
    else:
        pytest.fail(f"{flags} was taken")


@pytest.mark.parametrize(("flags", "said"), [BAD_FLAGS[0], BAD_FLAGS[3], BAD_FLAGS[5]])
def test_a_bad_fleet_flag_is_one_line_and_exit_2(tmp_path: Path, flags: list[str], said: str):
    out = run_cli("--home", str(tmp_path / "home"), *flags, "start", "--workflow", "FleetMailer", timeout=60)
    assert out.returncode == 2, out.stderr
    assert said in out.stderr and out.stderr.count("\n") <= 2, out.stderr
    assert not (tmp_path / "home" / "run" / "devserver.json").exists()  # nothing started


def _schedule(tmp_path: Path, *events: dict) -> Path:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"events": list(events)}))
    return path


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ({"at_s": 1, "nemesis": "churn", "fraction": 2}, "fraction must be a number in [0.01, 1]"),
        ({"at_s": 1, "nemesis": "churn", "interval_s": True}, "interval_s must be"),
        ({"at_s": 1, "nemesis": "fleet-down", "duration_s": 601}, "duration_s must be"),
        ({"at_s": 1, "nemesis": "fleet-down", "grace_s": 3}, "fleet-down takes no grace_s"),
        ({"at_s": 1, "nemesis": "dependency", "fault": "meteor"}, "fault must be one of latency, errors, blackhole"),
        ({"at_s": 1, "nemesis": "deploy", "rollback_after_s": float("nan")}, "rollback_after_s must be"),
        ({"at_s": 1, "nemesis": "graceful-restart", "queue": ["q"]}, "queue must be a name"),
    ],
)
def test_a_bad_game_day_event_is_a_usage_error(tmp_path: Path, event: dict, said: str):
    with pytest.raises(UsageError, match=said.replace("[", r"\[").replace("]", r"\]")):
        load_schedule(_schedule(tmp_path, event))


def test_events_are_checked_against_the_fleet_before_chaos_starts(tmp_path: Path):
    events, _, _ = load_schedule(
        _schedule(
            tmp_path,
            {"at_s": 1, "nemesis": "graceful-restart", "queue": "acts", "grace_s": 2},
            {"at_s": 2, "nemesis": "deploy", "queue": "wf", "rollback_after_s": 3},
            {"at_s": 3, "nemesis": "dependency", "fault": "latency", "duration_s": 2},
        )
    )
    assert [dict(e.opts) for e in events][0] == {"queue": "acts", "grace_s": 2.0}
    check_against(events, ["wf", "acts"], ["wf"], ["MAIL_API"], "s")  # the fleet has all three
    with pytest.raises(UsageError, match="deploy on wf needs --deploy wf=CMD"):
        check_against(events, ["wf", "acts"], [], ["MAIL_API"], "s")
    with pytest.raises(UsageError, match="names queue 'acts'; the fleet polls wf"):
        check_against(events, ["wf"], ["wf"], ["MAIL_API"], "s")
    with pytest.raises(UsageError, match="name one of --dependency"):
        check_against(events, ["wf", "acts"], ["wf"], [], "s")
    # time-placed events only: the file needs no step count (a user's workflow has none)
    assert events[0].to_json() == {
        "at_s": 1.0,
        "nemesis": "graceful-restart",
        "target": "worker",
        "delay_ms": 0,
        "queue": "acts",
        "grace_s": 2.0,
    }


def test_slots_name_their_command_and_a_deploy_swaps_only_the_command(tmp_path: Path):
    wf, acts, v2 = ("python", "wf.py"), ("python", "acts.py"), ("python", "wf_v2.py")
    s = Settings(
        home=tmp_path,
        task_queue_name="wf",
        worker_cmd=wf,
        pool_size=2,
        fleet=(FleetMember("acts", acts),),
        deploys=(FleetMember("wf", v2),),
    )
    s.ensure_dirs()
    assert fleet.slot_count(s) == 4 and fleet.queues(s) == ["wf", "acts"]
    assert [fleet.queue_of(s, slot) for slot in range(4)] == ["wf", "wf", "acts", "acts"]
    assert fleet.slots_of(s, "acts") == [2, 3]
    assert fleet.member_of(s, 0).cmd == wf
    fleet.set_deployed(s, "wf", True)
    assert fleet.member_of(s, 1).cmd == v2 and fleet.member_of(s, 1).queue == "wf"
    assert fleet.member_of(s, 2).cmd == acts  # the other command is untouched
    fleet.set_deployed(s, "wf", False)
    assert fleet.member_of(s, 0).cmd == wf


def test_a_hold_ends_and_the_state_files_are_not_read_through_a_link(tmp_path: Path):
    s = Settings(home=tmp_path, task_queue_name="wf", worker_cmd=("python", "wf.py"))
    s.ensure_dirs()
    fleet.hold_down(s, None, 1e12)  # every queue
    assert fleet.held_until(s, "wf") == 1e12
    fleet.hold_down(s, None, 1.0)  # a hold in the past is over
    assert fleet.held_until(s, "wf") == 1e12  # the later one still holds
    fleet.clear(s)
    assert fleet.held_until(s, "wf") is None
    fleet.mark_graceful(s, 4242)
    assert fleet.graceful(s, 4242) and not fleet.graceful(s, 4243)
    planted = tmp_path / "elsewhere.json"
    planted.write_text(json.dumps({"queues": ["wf"]}))
    (s.run_dir / fleet.DEPLOYED).unlink(missing_ok=True)
    os.symlink(planted, s.run_dir / fleet.DEPLOYED)
    assert fleet.deployed(s) == []  # a planted link is as if absent: it only ever narrows what runs
    (s.run_dir / fleet.HOLD).write_text("[" * 100_000)
    assert fleet.held_until(s, "wf") is None and not fleet.graceful(s, 4242)
