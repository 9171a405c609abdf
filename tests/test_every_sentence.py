"""What the lab says, checked against what it found: each case a sentence that was once untrue (#51)."""

from __future__ import annotations

import os

from checkpoint_tui.proof.chaos.printing import totals_line
from checkpoint_tui.proof.chaos.run_totals import totals
from checkpoint_tui.proof.report.audit import ActivityAuditRecord, LostWork, StepAuditRecord


def _run(n: int, lost_work: int | None) -> ActivityAuditRecord:
    read = LostWork(lost=lost_work, first="send_line #3 waited out its HEARTBEAT timeout") if lost_work else LostWork()
    return ActivityAuditRecord(
        run_id=f"run-{n}",
        workflow_status="COMPLETED",
        lost_work=read if lost_work is not None else None,
        lost_work_count=lost_work or 0,
    )


def test_the_line_over_all_runs_counts_the_lost_work_of_every_run_not_the_lead_s():
    """Ten runs, the seventh failed on a lost task: the line above `verdict: FAIL` says so."""
    t = totals([_run(n, 1 if n == 7 else 0) for n in range(10)])
    assert t.lost_work == 1
    assert totals_line(t) == "10/10 runs COMPLETED · over all runs: LOST 0 · DUPLICATED 0 · AT RISK 0 · LOST WORK 1"
    assert "lost_work_count" not in t.counts


def test_lost_work_is_not_claimed_where_no_history_was_read():
    t = totals([_run(1, None), _run(2, None)])
    assert t.lost_work is None and "LOST WORK" not in totals_line(t)
    ours = totals([StepAuditRecord(run_id="r", workflow_status="COMPLETED", total_steps=3)])
    assert ours.lost_work is None and totals_line(ours) == "1/1 runs COMPLETED · over all runs: LOST 0 · DUPLICATED 0"


def test_chaos_keeps_the_pool_size_it_was_given(tmp_path, monkeypatch):
    """`chaos --workers 2` ran one worker: the supervisor it starts was not told (#51 item 1). Its
    flags, parsed as its command line is, give the pool back, for both workloads, and for a node worker
    whose default pool is 2: `--workers 1` stays 1."""
    from checkpoint_tui.cli.commands import settings_from
    from checkpoint_tui.cli.parser import build_parser
    from checkpoint_tui.proof.chaos.engine import Chaos
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.workloads import AgentLoopWorkload, UserWorkflow

    node = tmp_path / "node"  # resolvable where no node is installed
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    workloads = [(AgentLoopWorkload(6, 0.3), None), (UserWorkflow("SendLines"), ("python", "w.py"))]
    for workload, cmd in [*workloads, (UserWorkflow("TsMailer"), (str(node), "w.js"))]:
        for pool in (1, 2, 3):
            settings = Settings(home=tmp_path / "h", pool_size=pool, worker_cmd=cmd)
            flags = Chaos(settings, 1, 6, [], workload.chaos_target(1)).supervise_flags()
            args = build_parser().parse_args(["--home", str(settings.home), *flags, "supervise"])
            assert settings_from(args).pool_size == pool, flags


def test_status_cites_chaos_s_own_report_of_a_run_and_passes_over_hostile_files(tmp_path):
    """After `stop`, status cannot read history: what chaos said of the run, from its report in run/,
    is what it can cite. A link, a FIFO, a huge file, garbage and another run's report are passed over."""
    import dataclasses
    import json
    import os

    from checkpoint_tui.proof.chaos.verdicts import MAX_BYTES, chaos_verdicts
    from checkpoint_tui.proof.report import Check
    from checkpoint_tui.proof.report.chaos import ChaosReport, RunRecord
    from checkpoint_tui.proof.report.codec import encode

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    failed = Check("chaos: the run lost no work", False, "send_line #3 waited out its HEARTBEAT timeout")
    lead = ChaosReport(seed=3, run_id="run-a", checks=[Check("chaos: workflow COMPLETED", True, "ok"), failed])
    lead = dataclasses.replace(lead, runs=[RunRecord(run_id="run-a"), RunRecord(run_id="run-b")])
    (run_dir / "chaos-seed3.json").write_text(json.dumps(encode(lead)))
    (run_dir / "chaos-seed4.json").write_text(json.dumps(encode(ChaosReport(seed=4, run_id="run-c", checks=[]))))
    (run_dir / "chaos-seed5.json").write_text("{not json")
    (run_dir / "chaos-seed6.json").write_text(json.dumps({"schema": 99}))
    (run_dir / "chaos-seed7.json").symlink_to(run_dir / "chaos-seed3.json")
    os.mkfifo(run_dir / "chaos-seed8.json")
    with open(run_dir / "chaos-seed9.json", "wb") as f:
        f.truncate(MAX_BYTES + 1)
    line = "chaos seed 3: verdict FAIL · chaos: the run lost no work: send_line #3 waited out its HEARTBEAT timeout"
    assert chaos_verdicts(run_dir, "run-b") == [{"path": str(run_dir / "chaos-seed3.json"), "line": line}]
    assert chaos_verdicts(run_dir, "run-c") == [
        {"path": str(run_dir / "chaos-seed4.json"), "line": "chaos seed 4: verdict PASS"}
    ]
    assert chaos_verdicts(run_dir, "run-z") == [] and chaos_verdicts(tmp_path / "none", "run-a") == []


def test_the_kill_lines_the_schedule_and_the_unfired_events_number_alike_and_every_landing_is_said():
    """#51 item 7: the schedule numbered a user's workflow's events by aimed start (`activity 2`), the
    kill lines by activity id (`activity 4`), `not fired` by aimed start again; a kill that landed
    `after it closed` printed no landing note when it had no measure of how far in."""
    from checkpoint_tui.proof.chaos.printing import fired_lines, place_word
    from checkpoint_tui.proof.chaos.schedule import ChaosEvent
    from checkpoint_tui.proof.report.chaos import ChaosReport, Fired, NotFired

    inside = Fired("worker-in-activity", 4, 4242, 1.0, {"label": "tool · send", "aimed": 2, "into_s": 0.1})
    inside.landed = "inside"
    closed = Fired("worker-in-activity", 6, 4243, 2.0, {"label": "tool · send", "aimed": 3})
    closed.landed = "after it closed"
    hop = Fired("worker-after-effect", 8, 4244, 3.0, {"aimed": 4, "window": "after its effect"})
    hop.landed = "after it closed"
    unfired = NotFired({"at_step": 5, "nemesis": "supervisor"}, "the run completed first")
    report = ChaosReport(unit="activity", kills=[inside, closed, hop], not_fired=[unfired])
    lines = fired_lines(report, None)  # type: ignore[arg-type] - no reset to summarise
    assert "activity    4 tool · send (aimed start 2) pid    4242 0.10 s in (inside)" in lines[0], lines[0]
    assert "activity    6 tool · send (aimed start 3) pid    4243 (after it closed)" in lines[1], lines[1]
    assert "activity    8 (aimed start 4) pid    4244 (after its effect; after it closed)" in lines[2], lines[2]
    assert lines[3] == "  not fired: supervisor at aimed start 5 (the run completed first)"
    assert ChaosEvent(2, "worker-in-activity", 0).describe(place_word("activity")).startswith("aimed start    2:")
    ours = ChaosReport(unit="step", kills=[Fired("worker-in-activity", 3, 1, 1.0, {"aimed": 3})])
    assert "step    3 pid" in fired_lines(ours, None)[0]  # type: ignore[arg-type]


def test_a_forced_framework_is_said_when_the_run_reads_as_another_and_the_counts_name_theirs(capsys):
    """#51 item 8: a forced --framework that names some of the run's activities while they read as
    another framework's was neither refused nor said, and the header named the detected framework while
    the counts came from the forced one. The user's word stands, said once; the counts name whose they are."""
    from checkpoint_tui.core import activity_history
    from checkpoint_tui.core.activity_history import ActivityExec, label
    from checkpoint_tui.frameworks import Declared

    def run() -> list[ActivityExec]:
        types = ["invoke_model_activity", "send_email", "invoke_model_activity"]  # OpenAI Agents' shape
        return [ActivityExec(i + 1, 0, "e", str(i + 1), t, 0.0) for i, t in enumerate(types)]

    activity_history._said.clear()
    acts = run()
    assert label(acts, "openai-agents") == "openai-agents" and {a.classed_by for a in acts} == {"openai-agents"}
    assert capsys.readouterr().err == ""  # the run is what --framework says: nothing to say
    acts = run()
    label(acts, "langgraph")  # names none of them: openai-agents' rules, said
    assert {a.classed_by for a in acts} == {"openai-agents"}
    assert "--framework langgraph recognises none of the run's activities" in capsys.readouterr().err
    mixed = [ActivityExec(1, 0, "e", "1", "agent__mailer__model_request", 0.0), *run()]  # pydantic-ai's first
    label(mixed, "openai-agents")  # it names some: the user's word stands, and is said
    assert {a.classed_by for a in mixed} == {"openai-agents"}
    said = capsys.readouterr().err
    assert (
        "--framework openai-agents: the run's activities read as pydantic-ai's; classified as openai-agents's" in said
    )
    acts = run()
    label(acts, Declared(model=("send_*",)))
    assert {a.classed_by for a in acts} == {"declared"} and acts[1].cls == "model"


def test_a_dev_servers_ports_are_picked_below_the_kernels_ephemeral_range():
    """#51 item 11: under xdist, a free-port pick (bind 0) took a port a killed dev server had on record
    and was about to take again. A dev server's ports come from below the ephemeral range, where no
    bind(0) lands, free, and never the same twice."""
    from pathlib import Path

    from checkpoint_tui.ops.devserver import _ports
    from checkpoint_tui.ops.procs import RECORDED_PORTS, free_port, port_is_free

    low, _high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert RECORDED_PORTS.stop <= low
    for _ in range(20):
        port, ui = _ports(None)
        assert port != ui and port in RECORDED_PORTS and ui in RECORDED_PORTS
        assert port_is_free(port) and port_is_free(ui)
        assert free_port() not in RECORDED_PORTS  # what any bind(0) gets


def test_doctor_advises_a_node_worker_in_typescript():
    """#50: doctor's fixes were Python (`activity.heartbeat()`, `heartbeat_timeout=timedelta(...)`) for a
    node worker. A worker command that runs node (or npm, npx, tsx, bun, deno ...) gets them in
    TypeScript; a Python one, and a framework's own words, as before."""
    from checkpoint_tui.core.diagnosis import ActivityType, _findings, _local_findings
    from checkpoint_tui.frameworks.base import ADVICE, PYTHON_HEARTBEAT_FIX, language_of

    assert [language_of(c) for c in (("node", "w.js"), ("npm run worker",), ("/usr/bin/npx", "tsx"))] == [
        "typescript"
    ] * 3
    assert [language_of(c) for c in (("python", "w.py"), (), None, ("",))] == ["python"] * 4
    slow = ActivityType("sendEmail", "other", count=3, start_to_close_s=60.0, maximum_attempts=1)
    ts = {f.kind: f.fix for f in _findings(slow, None, ADVICE["typescript"])}
    assert "heartbeatTimeout" in ts["kill-costs-timeout"] and "maximumAttempts" in ts["single-attempt"]
    assert "timedelta" not in " ".join(ts.values()) and "RetryPolicy(" not in " ".join(ts.values())
    assert "proxyActivities" in _local_findings({"x": 1}, 10.0, ADVICE["typescript"])[0].fix
    py = {f.kind: f.fix for f in _findings(slow, None, ADVICE["python"])}
    assert py["kill-costs-timeout"] == PYTHON_HEARTBEAT_FIX


def test_a_process_event_that_struck_steps_late_is_filed_under_the_step_it_struck(tmp_path):
    """A supervisor or dev-server kill, a partition or a pause placed at step 2's model call, struck
    by an engine that got there late: filed under the step a worker was in (4), or in the timer after
    step 3 under step 3 (where a worker-in-timer kill is filed), with the schedule's step beside it;
    on time, or after the last step, the schedule's own step stands."""
    from types import SimpleNamespace

    from checkpoint_tui.ledger.store import connect
    from checkpoint_tui.proof.chaos.loop_target import StepTarget
    from checkpoint_tui.proof.chaos.printing import fired_lines
    from checkpoint_tui.proof.chaos.schedule import ChaosEvent
    from checkpoint_tui.proof.report.chaos import ChaosReport, Fired
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.workloads import AgentLoopWorkload

    settings = Settings(home=tmp_path)
    settings.ensure_dirs()
    conn = connect(settings.ledger)
    chaos, target = SimpleNamespace(settings=settings, steps=6), StepTarget(AgentLoopWorkload(6), 0.1)

    def struck(ev: ChaosEvent) -> dict:
        target.striking(chaos, ev, "r")  # type: ignore[arg-type] - what striking reads of a chaos run
        return target.landing(ev)

    def step(n: int, status: str) -> None:
        conn.execute("INSERT OR REPLACE INTO steps (run_id, step, status) VALUES ('r', ?, ?)", (n, status))
        done = status == "completed"  # each attempt's activity row, as the worker's touches write it
        activity = "mark_step_completed" if done else "mark_step_running"
        conn.execute(
            "INSERT INTO activity_log (run_id, step, activity, attempt, worker_pid, started_at) "
            "VALUES ('r', ?, ?, 1, 9, 0)",
            (n, activity),
        )

    for n in (1, 2, 3):
        step(n, "completed")
    assert struck(ChaosEvent(2, "supervisor", 0)) == {"step": 3, "aimed": 2}  # in the timer after step 3
    step(4, "running")
    assert struck(ChaosEvent(2, "pause", 0)) == {"step": 4, "aimed": 2}
    assert struck(ChaosEvent(4, "temporal-server", 0)) == {}  # on time
    assert struck(ChaosEvent(2, "worker-in-timer", 0)) == {}  # the timer after step 2 is its place
    step(2, "completed")  # a reset re-runs step 2: step 4's row still says running, the log says 2
    assert struck(ChaosEvent(2, "supervisor", 0)) == {}
    for n in (4, 5, 6):
        step(n, "completed")
    assert struck(ChaosEvent(4, "partition", 0)) == {}  # after the last step: nowhere to say
    report = ChaosReport(unit="step", kills=[Fired("supervisor", 4, 77, 1.0, {"aimed": 2})])
    assert "step    4 (scheduled at step 2) pid      77" in fired_lines(report, None)[0]  # type: ignore[arg-type]


def test_the_app_s_chaos_screen_says_where_a_late_event_was_scheduled_too():
    from rich.text import Text

    from checkpoint_tui.proof.report.chaos import Fired
    from checkpoint_tui.tui.chaos_screen import result_text

    audit = {"ok": True, "workflow_status": "COMPLETED", "total_steps": 6, "step_gaps": [], "lost": 0}
    audit |= dict.fromkeys(("claims_attempted", "applied", "skipped", "recovered", "interrupted", "duplicated"), 0)
    late, on_time = Fired("supervisor", 4, 77, 1.0, {"aimed": 2}), Fired("temporal-server", 5, 78, 2.0, {})
    t = Text()
    result_text(t, {"audit": audit, "kills": [late.to_json(), on_time.to_json()]})
    assert "step    4 (scheduled at step 2) pid      77" in t.plain and "step    5 pid      78" in t.plain, t.plain
