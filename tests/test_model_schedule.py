"""`chaos --model-faults N` (#53): seeded model faults in a user's workflow's schedule, on the starts the
other events leave free, written and read back as any schedule file, and refused where they cannot
apply, before anything starts."""

from __future__ import annotations

import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.chaos.fleet_lab import check_against
from checkpoint_tui.proof.chaos.model_schedule import ARMED_S, SEEDED
from checkpoint_tui.proof.chaos.schedule import load_schedule, save_schedule
from checkpoint_tui.proof.chaos.workflow_schedule import workload_schedule
from conftest import run_cli


def test_model_faults_leave_a_seeds_other_events_their_kinds_and_are_the_same_for_a_seed():
    plain, _ = workload_schedule(4, 5, pauses=1)
    with_faults, span = workload_schedule(4, 5, pauses=1, model_faults=3, models=("OPENAI_BASE_URL",))
    faults = [e for e in with_faults if e.kind in SEEDED]
    assert sorted(e.kind for e in with_faults if e.kind not in SEEDED) == sorted(e.kind for e in plain)
    assert len(faults) == 3 and span == 5 + 1 + 3 + 2
    assert len({e.step for e in with_faults}) == len(with_faults)  # one event per start
    assert workload_schedule(4, 5, pauses=1, model_faults=3, models=("OPENAI_BASE_URL",))[0] == with_faults
    for ev in faults:
        opts = dict(ev.opts)
        assert ev.duration_s == ARMED_S and 1 <= opts["requests"] <= 4 and "endpoint" not in opts, ev
    kinds = {e.kind for seed in range(1, 30) for e in workload_schedule(seed, 0, model_faults=4, models=("A",))[0]}
    assert kinds == set(SEEDED)  # every seeded kind comes up; model-timeout is left to schedule files


def test_seeded_model_faults_round_trip_through_a_schedule_file_and_name_an_endpoint_when_there_are_two(tmp_path):
    events, span = workload_schedule(2, 0, model_faults=6, models=("A_URL", "B_URL"))
    assert all(dict(e.opts)["endpoint"] in ("A_URL", "B_URL") for e in events)
    path = tmp_path / "faults.json"
    save_schedule(path, events, span, 2)
    assert load_schedule(path, None) == (events, span, 2)  # what a file holds, checked as a file is
    check_against(events, ["q"], [], [], "faults.json", ["A_URL", "B_URL"])
    with pytest.raises(UsageError, match="name one of --model-endpoint"):
        check_against(events, ["q"], [], [], "faults.json", ["A_URL"])


def test_model_faults_need_an_endpoint_and_fewer_kills_need_them_or_resets():
    with pytest.raises(UsageError, match="--model-faults needs --model-endpoint"):
        workload_schedule(1, 3, model_faults=2)
    with pytest.raises(UsageError, match="--kills must be at least 3"):
        workload_schedule(1, 0)
    assert [e.kind for e in workload_schedule(1, 0, model_faults=1, models=("A",))[0]][0] in SEEDED


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["chaos", "--model-faults", "2"], "--model-faults goes with --workflow"),
        (["chaos", "--model-faults", "2", "--kills", "0"], "--model-faults goes with --workflow"),
        (["chaos", "--kills", "0"], "--kills must be at least 3"),
    ],
)
def test_model_faults_on_our_own_loop_are_one_line_exit_2(tmp_path, words, said):
    out = run_cli("--home", str(tmp_path / "h"), *words, "--save-schedule", str(tmp_path / "s.json"))
    assert out.returncode == 2 and said in out.stderr, out.stderr
    assert not (tmp_path / "s.json").exists()


def test_the_model_clients_base_url_variables_count_as_given_only_where_no_flag_is(tmp_path):
    from dataclasses import replace

    from checkpoint_tui.cli.model_env import endpoints_from_environment
    from checkpoint_tui.settings import Settings

    user = Settings(home=tmp_path / "h", worker_cmd=("python", "w.py"))
    environ = {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1/", "ANTHROPIC_BASE_URL": "https://models.example"}
    assert endpoints_from_environment(user, environ).model_endpoints == (
        ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
        ("ANTHROPIC_BASE_URL", "https://models.example"),
    )
    given = replace(user, model_endpoints=(("MY_MODEL_URL", "http://127.0.0.1:1"),))
    assert endpoints_from_environment(given, environ) is given  # the flag wins, alone
    with pytest.raises(UsageError) as bad:
        endpoints_from_environment(user, {"OPENAI_BASE_URL": "https://k:sk-secret@models.example/v1"})
    assert "from the environment's OPENAI_BASE_URL" in str(bad.value) and "sk-secret" not in str(bad.value)


def test_what_the_agent_did_about_a_fault_is_read_from_the_runs_histories():
    from types import SimpleNamespace

    from checkpoint_tui.proof.chaos.model_outcome import AGENT, FAILED, NONE, TEMPORAL, answered_by

    spell = {"fault": "model-garbage", "began": 100.0, "stopped": 104.0, "asked_after": 2}
    retried = {"scheduled_at": 99.5, "started_at": 105.5, "last_failure": "1 validation error for AIMessage"}
    storm = {**retried, "last_failure": "Rate limit reached (checkpoint-tui model-rate-limit)"}
    later = {"scheduled_at": 120.0, "started_at": 121.0, "last_failure": "x"}

    def runs(*reruns: dict, status: str = "COMPLETED") -> list:
        return [SimpleNamespace(workflow_status=status, model_reruns=list(reruns))]

    assert answered_by(spell, runs(retried)) == TEMPORAL
    assert answered_by({**spell, "fault": "model-rate-limit"}, runs(storm)) == TEMPORAL
    assert answered_by(spell, runs(storm)) == AGENT  # that retry was the storm's, said in its failure
    assert answered_by(spell, runs(retried), deaths=[101.0]) == AGENT  # a kill's retry: not this fault's
    assert answered_by(spell, runs(later)) == AGENT  # one after the fault: not its
    assert answered_by({**spell, "asked_after": 0}, runs(status="FAILED")) == FAILED
    assert answered_by({**spell, "asked_after": 0}, runs()) == NONE
    assert answered_by(spell, [SimpleNamespace(workflow_status="COMPLETED")]) == AGENT  # our loop's: no reruns
