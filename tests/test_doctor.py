"""`doctor`: a user's worker (tests/doctor_worker.py) whose one activity is scheduled four ways, the
agent examples with their frameworks' defaults, and our own loop; `--measure` kills the worker under
each activity type (real SIGKILLs of real worker processes). Real worker processes on the session's
dev server (an external address: doctor starts no server of its own)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_examples import OPENAI_WORKER, PYDANTIC_WORKER
from conftest import run_cli, worker_flags
from test_user_workflow_lab import stop_lab

WORKER = Path(__file__).resolve().parent / "doctor_worker.py"
SLACK_S = 5.0  # beyond a predicted kill → retry: a cold spawn of the replacement worker on a loaded machine


def flags(home: Path, address: str, worker: Path) -> list[str]:
    return worker_flags(home, worker, "dr", address=address)


def test_doctor_names_a_missing_heartbeat_a_single_attempt_and_a_local_activity(temporal_address, session_root):
    home = session_root / "doctor-user"
    lab = flags(home, temporal_address, WORKER)
    try:
        bad = run_cli(*lab, "doctor", "--workflow", "NoHeartbeat", "--json", str(home / "bad.json"), timeout=120)
        good = run_cli(*lab, "doctor", "--workflow", "Heartbeat2s", timeout=120)
        single = run_cli(*lab, "doctor", "--workflow", "SingleAttempt", timeout=120)
        local = run_cli(*lab, "doctor", "--workflow", "LocalOnly", timeout=120)
        nope = run_cli(*lab, "doctor", "--workflow", "Nope", timeout=120)  # it said "no findings", exit 0 (#39)
        report = json.loads((home / "bad.json").read_text())
        again = run_cli(*lab, "doctor", report["workflow_id"], "--json", str(home / "again.json"), timeout=60)
    finally:
        stop_lab(home)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert (
        "send_note: a worker killed under it is retried only after its start-to-close (no heartbeat timeout) "
        "of 30 s" in bad.stdout
    )
    assert "fix: heartbeat from the activity" in bad.stdout and "heartbeat_timeout=" in bad.stdout
    (kind,) = report["activity_types"]
    assert (kind["activity_type"], kind["count"], kind["heartbeat_timeout_s"], kind["start_to_close_s"]) == (
        "send_note",
        2,
        None,
        30.0,
    )
    assert kind["predicted_unassisted_restart_s"] == 31.0 and report["ok"] is False
    assert [f["kind"] for f in report["findings"]] == ["kill-costs-timeout"]
    assert good.returncode == 0, good.stdout + good.stderr
    assert "no findings" in good.stdout and "2 s" in good.stdout
    assert single.returncode == 1 and "maximum_attempts=1: one kill fails the activity" in single.stdout
    assert local.returncode == 1 and "a local activity (1 run)" in local.stdout, local.stdout + local.stderr
    assert nope.returncode == 1 and "ended WORKFLOW_TASK_FAILING" in nope.stdout, nope.stdout + nope.stderr
    assert "1 finding(s)" in nope.stdout and "no findings" not in nope.stdout
    # a finished run read again (nothing started): the same report
    assert again.returncode == 1 and "started" not in again.stdout
    assert json.loads((home / "again.json").read_text()) == report


@pytest.mark.parametrize(
    ("worker", "workflow", "tool"),
    [
        (PYDANTIC_WORKER, "PydanticMailerGuarded", "send_email"),
        (OPENAI_WORKER, "OpenAIMailerGuarded", "send_email_guarded"),
    ],
    ids=["pydantic-ai", "openai-agents"],
)
def test_doctor_on_the_agent_examples_names_the_tools_missing_heartbeat(
    worker, workflow, tool, temporal_address, session_root
):
    home = session_root / f"doctor-{worker.parent.name}"
    try:
        out = run_cli(
            *flags(home, temporal_address, worker),
            "doctor",
            "--workflow",
            workflow,
            "--input",
            '{"turns": 2, "pace": 0.6}',
            "--measure",
            "--kill-cap",
            "2",
            "--json",
            str(home / "r.json"),
            timeout=180,
        )
    finally:
        stop_lab(home)
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads((home / "r.json").read_text())
    tools = [t for t in report["activity_types"] if t["class"] == "tool"]
    assert tools and all(t["heartbeat_timeout_s"] is None for t in tools), report["activity_types"]
    flagged = {f["subject"] for f in report["findings"] if f["kind"] == "kill-costs-timeout"}
    assert {t["activity_type"] for t in tools} <= flagged
    assert any(tool in t["activity_type"] or t["class"] == "tool" for t in tools)
    fix = "toolset_activity_config" if "pydantic" in workflow.lower() else "activity_as_tool"
    assert fix in out.stdout, out.stdout
    # one unassisted kill under a tool call (a 0.6 s send): its start-to-close is not waited out, the cap is said
    for t in tools:
        assert (t["measured"]["outcome"], t["measured"]["measured_s"]) == ("capped", 2.0), t
        assert t["measured"]["confirms"].startswith("the cap is under the predicted"), t


def test_doctor_on_our_own_loop_finds_nothing_and_measures_its_model_call(temporal_address, session_root):
    home = session_root / "doctor-ours"
    try:
        out = run_cli(
            "--home",
            str(home),
            "--temporal-address",
            temporal_address,
            "doctor",
            "--steps",
            "2",
            "--measure",
            "--json",
            str(home / "r.json"),
            timeout=120,
        )
    finally:
        run_cli("--home", str(home), "stop")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no findings" in out.stdout and "llm" in out.stdout and "effect" in out.stdout
    types = {t["activity_type"]: t for t in json.loads((home / "r.json").read_text())["activity_types"]}
    llm = types["llm"]["measured"]  # the model call thinks 0.4-0.8 s in the measuring run: a kill lands in it
    # its attempt 1 as a rule; 2 where an earlier kill of the measuring run had already cost it attempt 1
    # (seen in 2 of about 8 full suites on 2 cores): the figure is the killed attempt's either way
    assert llm["outcome"] == "retried" and llm["killed_attempt"] in (1, 2), llm
    assert 0 < llm["measured_s"] <= types["llm"]["predicted_unassisted_restart_s"] + SLACK_S, llm
    for t in types.values():  # a figure only where a kill landed; otherwise why not
        m = t["measured"]
        assert (m["measured_s"] is None) == (m["outcome"] == "not-measured"), m
        assert m["measured_s"] is not None or m["why"], m


def test_doctor_measure_kills_under_a_2s_heartbeat_and_finds_it_near_the_prediction(temporal_address, session_root):
    home = session_root / "doctor-measure"
    try:
        out = run_cli(
            *flags(home, temporal_address, WORKER),
            "doctor",
            "--workflow",
            "Heartbeat2s",
            "--input",
            "3",
            "--measure",
            "--json",
            str(home / "r.json"),
            timeout=120,
        )
    finally:
        stop_lab(home)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads((home / "r.json").read_text())
    (kind,) = report["activity_types"]
    m, predicted = kind["measured"], kind["predicted_unassisted_restart_s"]
    assert predicted == 3.0 and report["measure"]["cap_s"] == 15.0 and report["measure"]["run_id"], report
    assert m["outcome"] == "retried" and m["killed_attempt"] == 1 and m["pid"] > 0, m
    # kill → attempt 2 started, as Temporal recorded it: the heartbeat timeout (2 s after the last beat,
    # which the SDK sends at most every 1.6 s) + the first retry (1 s) + the replacement worker polling
    assert 0.3 < m["measured_s"] <= predicted + SLACK_S, m
    assert m["confirms"] == "confirms no kill-costs-timeout (under 10 s)"
    assert f"SIGKILL pid {m['pid']} under send_note" in out.stdout
    assert "send_note" in out.stdout and f"measured {m['measured_s']:.2f} s (attempt 2 started)" in out.stdout


def test_doctor_measure_stops_at_the_cap_and_says_so(temporal_address, session_root):
    """No heartbeat timeout and a 30 s start-to-close: the kill is not waited out; "≥ cap", honestly."""
    home = session_root / "doctor-cap"
    try:
        out = run_cli(
            *flags(home, temporal_address, WORKER),
            "doctor",
            "--workflow",
            "NoHeartbeat",
            "--input",
            "2",
            "--measure",
            "--kill-cap",
            "2",
            "--json",
            str(home / "r.json"),
            timeout=120,
        )
    finally:
        stop_lab(home)
    assert out.returncode == 1, out.stdout + out.stderr
    report = json.loads((home / "r.json").read_text())
    (kind,) = report["activity_types"]
    m = kind["measured"]
    assert (m["outcome"], m["measured_s"], report["measure"]["cap_s"]) == ("capped", 2.0, 2.0), m
    assert "waiting for attempt 2 (predicted 31 s, cap 2 s)" in out.stdout  # said before the wait
    assert "no attempt 2 within 2.0 s; the dead worker's attempt was failed so the run goes on" in out.stdout
    assert "measured ≥ 2.0 s (cap)" in out.stdout and "the cap is under the predicted 31 s" in out.stdout
    assert "had not ended" not in out.stdout  # the run went on once the dead worker's attempt was failed
    # the acceptance of #28 holds with --measure: the activity and its missing heartbeat are named
    assert [f["kind"] for f in report["findings"]] == ["kill-costs-timeout"]
    assert (
        "send_note: a worker killed under it is retried only after its start-to-close (no heartbeat timeout)"
        in out.stdout
    )


def test_doctor_measure_refuses_a_home_another_supervisor_owns(temporal_address, tmp_path):
    """Its kills would be respawned, and assisted, by the owner: the figure would not be unassisted."""
    import fcntl
    import os

    home = tmp_path / "owned"
    (home / "run").mkdir(parents=True)
    fd = os.open(home / "run" / "supervisor.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a live supervisor of the home holds it
        out = run_cli("--home", str(home), "--temporal-address", temporal_address, "doctor", "--measure")
    finally:
        os.close(fd)
    assert out.returncode == 1 and "another supervisor" in out.stderr and "owns" in out.stderr, out.stderr
    assert not (home / "run" / "worker.json").exists()  # no worker started, none killed


def test_doctor_usage_errors_start_nothing(tmp_path):
    home = tmp_path / "h"
    cases = [
        (["doctor", "--workflow", "X"], "give --worker-cmd too"),
        (["doctor", "run-20260101-000000-abcd", "--steps", "2"], "doctor RUN reads a finished run"),
        (["doctor", "run-20260101-000000-abcd"], "has no ledger yet"),
        (["doctor", "bad id!"], "is not a run id"),
        (["doctor", "--timeout", "0"], "--timeout"),
        (["doctor", "--measure", "--kill-cap", "0"], "--kill-cap"),
        (["doctor", "--measure", "--kill-cap", "-3"], "--kill-cap"),
        (["doctor", "--measure", "--kill-cap", "nan"], "--kill-cap"),
        (["doctor", "--measure", "--kill-cap", "inf"], "--kill-cap"),
        (["doctor", "--measure", "--kill-cap", "1e9"], "--kill-cap"),
        (["doctor", "--measure", "--kill-cap", "15s"], "--kill-cap"),
        (["doctor", "--kill-cap", "5"], "--kill-cap goes with --measure"),
        (["doctor", "run-20260101-000000-abcd", "--measure"], "--measure kills workers under runs doctor starts"),
    ]
    for argv, said in cases:
        out = run_cli("--home", str(home), *argv)
        assert out.returncode == 2 and said in out.stderr, (argv, out.stderr)
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 2, out.stderr
    assert not (home / "run").exists() or not any((home / "run").iterdir())


def _history(*, heartbeat: float | None, start_to_close: float, attempts: int = 0, local: bool = False):
    """A two-activity history as the server records it (protobuf events), for diagnose() alone."""
    from google.protobuf.duration_pb2 import Duration
    from google.protobuf.timestamp_pb2 import Timestamp
    from temporalio.api.common.v1 import ActivityType, Payload, Payloads, RetryPolicy
    from temporalio.api.enums.v1 import EventType
    from temporalio.api.history.v1 import HistoryEvent

    from checkpoint_tui.core.activity_history import Chain

    def at(s: float) -> Timestamp:
        return Timestamp(seconds=int(1_700_000_000 + s), nanos=int((s % 1) * 1e9))

    events = [HistoryEvent(event_id=1, event_time=at(0), event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)]
    events[0].workflow_execution_started_event_attributes.workflow_task_timeout.CopyFrom(Duration(seconds=10))
    n = 2
    for i in range(2):
        if local:
            ev = HistoryEvent(event_id=n, event_time=at(i), event_type=EventType.EVENT_TYPE_MARKER_RECORDED)
            ev.marker_recorded_event_attributes.marker_name = "core_local_activity"
            ev.marker_recorded_event_attributes.details["data"].CopyFrom(
                Payloads(
                    payloads=[
                        Payload(metadata={"encoding": b"json/plain"}, data=b'{"activity_type": "send_note", "seq": 1}')
                    ]
                )
            )
            events.append(ev)
            n += 1
            continue
        sched = HistoryEvent(event_id=n, event_time=at(i), event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
        a = sched.activity_task_scheduled_event_attributes
        a.activity_id = str(i)
        a.activity_type.CopyFrom(ActivityType(name="send_note"))
        a.start_to_close_timeout.CopyFrom(Duration(seconds=int(start_to_close)))
        if heartbeat:
            a.heartbeat_timeout.CopyFrom(Duration(seconds=int(heartbeat)))
        a.retry_policy.CopyFrom(RetryPolicy(maximum_attempts=attempts, initial_interval=Duration(seconds=1)))
        start = HistoryEvent(
            event_id=n + 1, event_time=at(i + 0.1), event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        )  # noqa: E501
        start.activity_task_started_event_attributes.scheduled_event_id = n
        start.activity_task_started_event_attributes.attempt = 1
        done = HistoryEvent(
            event_id=n + 2, event_time=at(i + 0.6), event_type=EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        )  # noqa: E501
        done.activity_task_completed_event_attributes.scheduled_event_id = n
        done.activity_task_completed_event_attributes.started_event_id = n + 1
        events += [sched, start, done]
        n += 3
    return Chain("wf-1", [("exec-1", events)])


def test_diagnose_reads_timeouts_and_retries_from_history_alone():
    from checkpoint_tui.core.diagnosis import diagnose

    bad = diagnose(_history(heartbeat=None, start_to_close=30))
    (t,) = bad.types
    assert (t.count, t.heartbeat_timeout_s, t.start_to_close_s, t.maximum_attempts) == (2, None, 30.0, 0)
    assert t.median_s == pytest.approx(0.5) and t.predicted_restart_s == 31.0
    assert [(f.kind, f.subject) for f in bad.findings] == [("kill-costs-timeout", "send_note")]
    assert "it usually runs 0.50 s" in bad.findings[0].problem
    good = diagnose(_history(heartbeat=2, start_to_close=30))
    assert good.findings == [] and "no findings" in "\n".join(good.lines())
    long_beat = diagnose(_history(heartbeat=60, start_to_close=300))
    assert "its heartbeat timeout of 60 s" in long_beat.findings[0].problem
    single = diagnose(_history(heartbeat=2, start_to_close=5, attempts=1))
    assert [f.kind for f in single.findings] == ["single-attempt"]
    local = diagnose(_history(heartbeat=None, start_to_close=5, local=True))
    assert local.local_activities == {"send_note": 2} and [f.kind for f in local.findings] == ["local-activity"]
    assert "workflow task timeout (10 s)" in local.findings[0].problem


def test_next_attempt_reads_what_temporal_did_after_the_kill():
    from checkpoint_tui.core.activity_history import ActivityExec
    from checkpoint_tui.proof.measure.kill_cost import next_attempt

    def act(**kw) -> ActivityExec:
        return ActivityExec(1, 0, "exec-1", "1", "send_note", 100.0, **kw)

    killed = 101.0  # attempt 1 was running from 100.5; the worker died at 101
    assert next_attempt(act(attempt=1, status="running", started_at=100.5), 1, killed) is None
    assert next_attempt(act(attempt=2, status="scheduled"), 1, killed) is None  # timed out, not picked up yet
    assert next_attempt(act(attempt=2, status="running", started_at=104.0), 1, killed) == ("retried", 104.0)
    assert next_attempt(act(attempt=2, status="completed", started_at=104.0, closed_at=104.5), 1, killed) == (
        "retried",
        104.0,
    )
    assert next_attempt(act(attempt=1, status="completed", started_at=100.5, closed_at=100.9), 1, killed) == "missed"
    assert next_attempt(act(attempt=1, status="timed-out", started_at=100.5, closed_at=103.0), 1, killed) == (
        "failed",
        103.0,
    )
    assert next_attempt(act(attempt=3, status="completed", started_at=110.0, closed_at=111.0), 1, killed) == "unseen"


def test_a_measurement_confirms_or_questions_the_finding():
    from checkpoint_tui.core.diagnosis import Measurement, diagnose

    slow = diagnose(_history(heartbeat=None, start_to_close=30))
    capped = Measurement("send_note", "capped", 15.0, attempt=1)
    slow.with_measured({"send_note": capped}, "run-2", 15.0)
    text = "\n".join(slow.lines())
    assert "predicted  31.0 s  measured ≥ 15.0 s (cap)  · confirms kill-costs-timeout" in text
    assert slow.to_dict()["activity_types"][0]["measured"]["confirms"] == "confirms kill-costs-timeout"
    short_cap = diagnose(_history(heartbeat=None, start_to_close=30))
    short_cap.with_measured({"send_note": Measurement("send_note", "capped", 3.0, attempt=1)}, "run-2", 3.0)
    assert "the cap is under the predicted 31 s" in "\n".join(short_cap.lines())
    good = diagnose(_history(heartbeat=2, start_to_close=30))
    good.with_measured({"send_note": Measurement("send_note", "retried", 2.4, attempt=1)}, "run-2", 15.0)
    assert good.findings == [] and "measured 2.40 s (attempt 2 started)  · confirms no kill-costs-timeout" in "\n".join(
        good.lines()
    )
    late = diagnose(_history(heartbeat=2, start_to_close=30))  # predicted 3 s, measured 12 s: a finding of its own
    late.with_measured({"send_note": Measurement("send_note", "retried", 12.0, attempt=1)}, "run-2", 15.0)
    assert [f.kind for f in late.findings] == ["kill-measured-slow"]
    single = diagnose(_history(heartbeat=2, start_to_close=5, attempts=1))
    single.with_measured({"send_note": Measurement("send_note", "failed", 2.1, attempt=1)}, "run-2", 15.0)
    assert "then the activity failed (attempt 1 not retried)  · confirms single-attempt" in "\n".join(single.lines())
    missed = diagnose(_history(heartbeat=2, start_to_close=30))
    missed.with_measured({"send_note": Measurement("send_note", why="each of its 2 run(s) closed first")}, "r", 15.0)
    line = next(x for x in missed.lines() if x.startswith("  send_note") and "predicted" in x)
    assert line.endswith("predicted   3.0 s  not measured (each of its 2 run(s) closed first)"), line
    assert missed.to_dict()["activity_types"][0]["measured"]["measured_s"] is None


def test_doctor_leaves_nothing_it_started_running(session_root):
    """`doctor` on a fresh home starts a dev server and a worker to run the workload once: it stops both
    before it exits and says so, so `stop` afterwards finds nothing of the home running (#38)."""
    home = session_root / "doctor-leaves-nothing"
    try:
        out = run_cli("--home", str(home), "doctor", "--steps", "1", timeout=180)
    finally:
        after = run_cli("--home", str(home), "stop")
    assert out.returncode in (0, 1), out.stdout[-2000:] + out.stderr[-2000:]  # 1: findings, which is fine here
    assert "doctor: stopped what it started (worker" in out.stdout and "dev server" in out.stdout
    assert "nothing of this home was running" in after.stdout, after.stdout
