"""A user's fleet on screen (#40), on fixed data: each command's live workers, deployed and held down, the
task queues' backlog, the audit's LOST WORK beside LOST / DUPLICATED / AT RISK (from the audit the
completion sentence came from), and the lab's fleet events as marker lines in the history like kills. The
reads behind them on their own: the fleet's files, the backlog's pacing, the fleet events' query."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator

import pytest

from checkpoint_tui.core import activity_timeline
from checkpoint_tui.core.activity_audit import ActivityAudit
from checkpoint_tui.core.activity_timeline import ActivityTimeline
from checkpoint_tui.core.fleet_marks import marker_text
from checkpoint_tui.core.fleet_view import Periodic, is_fleet, read_fleet
from checkpoint_tui.core.mark_feed import MarkFeed
from checkpoint_tui.core.session import LabSession
from checkpoint_tui.core.view import Backlog, FleetCommand, RunCounts
from checkpoint_tui.ledger import inspect_queries as iq
from checkpoint_tui.ledger.inspect_queries import FleetEvent
from checkpoint_tui.ledger.rows import WorkerEvent
from checkpoint_tui.ledger.store import connect, create_run, record_worker_event
from checkpoint_tui.ops import fleet as fleet_files
from checkpoint_tui.settings import FleetMember, Settings
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.panes.worker_events import describe
from checkpoint_tui.workloads import UserWorkflow
from tui_fixtures import RUN, T0, FixedSession, screen_lines, snap, step, step_history, view

SIZE = (160, 44)
SIGTERM = {"nemesis": "graceful-restart", "graceful": True, "grace_s": 10.0, "queue": "fleet-activities"}
SIGTERM_LINE = "── graceful restart of worker 4121 on fleet-activities · SIGTERM, 10 s grace ──"

pytestmark = pytest.mark.usefixtures("utc")  # conftest: clock lines in UTC (T0 + 70 s reads 11:07:50)


def fleet_view(**kw):
    """A run of a user's workflow on a two-command fleet that ended with two units of work lost: the
    activity command deployed and held down by a fleet-down, three activity tasks waiting."""
    s = snap([step(i) for i in range(1, 5)], 4, status="COMPLETED", run_status="completed")
    s.unit, s.units, s.outbox, s.workflow_type = "activity", "activities", False, "FleetMailer"
    audit = ActivityAudit(
        RUN,
        "FleetMailer",
        "COMPLETED",
        activities=4,
        completed=4,
        lost_work_count=2,
        lost_work={"lost": 2, "first": "send_receipt #3 timed out for good"},
    )
    base = dict(
        completion=audit.sentence(),
        counts=RunCounts(audit.lost, audit.duplicated, len(audit.at_risk), 2),
        fleet=[FleetCommand("fleet-workflows", 1, 1), FleetCommand("fleet-activities", 1, 2, True, T0 + 70)],
        backlog=Backlog(3, (("fleet-workflows", 0), ("fleet-activities", 3))),
        spare_pid=None,
    )
    return view(s, **{**base, **kw})


@contextlib.asynccontextmanager
async def shown(v) -> AsyncIterator[tuple[CheckpointApp, list[str]]]:
    """The app on `v` once its first View is applied, and its screen as text."""
    app = CheckpointApp(FixedSession(v, UserWorkflow("FleetMailer")), poll_interval=3600)
    app.animation_level = "none"
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(100):
            if app.session.polls:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        yield app, screen_lines(app)


async def test_fleet_backlog_and_lost_work_are_on_screen():
    async with shown(fleet_view()) as (_, lines):
        pass
    screen = "\n".join(lines)
    assert "fleet 2/3 live · backlog 3" in lines[0], lines[0]  # the status bar sums the fleet
    assert "fleet-workflows   1/1 live" in screen
    assert "fleet-activities  1/2 live · deployed · down until 11:07:50" in screen
    assert "backlog 3 (fleet-activities 3)" in screen
    assert "4/4 activities completed · LOST 0 · DUPLICATED 0 · AT RISK 0 · LOST WORK 2" in screen
    assert "work lost: send_receipt #3 timed out for good" in screen  # the verdict the counts came with


async def test_one_command_keeps_its_worker_pid_and_no_fleet_lines():
    """Our worker, or a single command: `worker PID` as before; no backlog read: no line for one."""
    async with shown(fleet_view(fleet=None, backlog=None, counts=None)) as (_, lines):
        pass
    screen = "\n".join(lines)
    assert "worker 4121" in lines[0] and "fleet" not in lines[0] and "backlog" not in screen
    assert "LOST WORK" not in screen


async def test_a_sigterm_is_a_marker_line_between_the_events_around_it():
    at = T0 + 4.3  # in step 4's model call
    mark = FleetEvent(7, at, "sigterm", 4121, None, "w-964d45", SIGTERM)
    v = fleet_view(history=step_history(8, 4, at), marks=[mark], completion=None, counts=None)
    async with shown(v) as (app, _):
        history = app.query_one("#history")
        assert history.names.count("MARK") == 1
        row = history.names.index("MARK")
        assert str(history.get_cell(history.row_keys()[row], "event")) == SIGTERM_LINE
        before, after = history.events[row - 1], history.events[row]  # the marker is not among the events
        assert before.time <= at < after.time
        assert history.scroll_to_marker(1) == f"marker 1 of 1: {SIGTERM_LINE}"
        assert history.marker_step() is None  # a graceful stop interrupted no step of ours to inspect


def test_the_worker_events_pane_says_what_each_fleet_event_was():
    def said(event: str, detail: dict, pid: int | None = 4121) -> str:
        return describe(WorkerEvent(1, T0, event, pid, None, None, json.dumps(detail), None, None))

    assert said("sigterm", SIGTERM) == SIGTERM_LINE.strip("─ ")
    assert said("exit", {"signal": None, "exit_code": 0, "graceful": True, "queue": "fleet-activities"}) == (
        "worker 4121 on fleet-activities exited after its SIGTERM · exit code 0"
    )
    grace_over = "worker 4121 SIGKILLed when its SIGTERM grace ran out"
    assert said("exit", {"signal": "SIGKILL", "graceful": True}) == grace_over
    assert said("exit", {"signal": "SIGTERM", "graceful": True}) == "worker 4121 ended by SIGTERM"
    down = {"signal": "SIGKILL", "queue": "fleet-activities", "workers": [1, 2], "duration_s": 10.0}
    assert said("chaos:fleet-down", down, None) == (
        "chaos fleet-down: every worker of fleet-activities down 10 s (2 SIGKILLed)"
    )
    deploy = {"queue": "fleet-workflows", "deployed": [9], "deployed_at": T0, "rolled_back_at": T0 + 8}
    assert said("chaos:deploy", deploy, None) == (
        "chaos deploy: fleet-workflows → its new version (1 worker rolled) · rolled back 8 s later"
    )
    assert said("spawn", {}) == "spawn 4121 · " + json.dumps({})  # any other event as before


def test_fleet_events_of_a_run(ledger_target):
    """Filed under the run, or under none while it was live; not before it, not other kinds."""
    conn = connect(ledger_target)
    record_worker_event(conn, "sigterm", 50, "w-early", detail=json.dumps(SIGTERM), at=time.time() - 60)
    create_run(conn, RUN, 4, 0.0, "offline", "fleet-workflows")
    now = time.time()
    ids = [
        record_worker_event(conn, "sigterm", 100, "w-a", detail=json.dumps(SIGTERM), at=now + 1),
        record_worker_event(conn, "exit", 100, "w-a", RUN, None, json.dumps({"graceful": True}), now + 2),
        record_worker_event(conn, "chaos:fleet-down", None, None, RUN, None, json.dumps({"queue": "all"}), now + 3),
    ]
    record_worker_event(conn, "spawn", 101, "w-b", detail="active worker", at=now + 4)
    record_worker_event(conn, "chaos:worker-kill", 101, None, RUN, 2, "{}", now + 5)
    found = iq.fleet_page(conn, RUN)[0]
    assert [e.id for e in found] == ids
    assert found[0].detail == SIGTERM and found[0].identity == "w-a" and found[0].pid_label == "100"
    assert [e.id for e in iq.fleet_page(conn, RUN, after_id=ids[1])[0]] == ids[2:]
    feed = MarkFeed()  # what a poller delivers: each once
    assert [m.id for m in feed.new(conn, RUN, reset=True)[1]] == ids
    assert feed.new(conn, RUN, reset=False)[1] == []
    later = record_worker_event(conn, "sigterm", 102, "w-c", detail=json.dumps(SIGTERM), at=now + 6)
    assert [m.id for m in feed.new(conn, RUN, reset=False)[1]] == [later]


def test_a_dev_server_kill_and_a_partition_mark_every_run_on_the_lab_s_queues(ledger_target):
    """Filed under the lead run, they reached every run on the lab's queues then: each run's history marks
    them, in words; a run on another lab's queue (a shared ledger) is not marked."""
    conn = connect(ledger_target)
    create_run(conn, RUN, 4, 0.0, "offline", "lab-q")
    create_run(conn, "run-other", 4, 0.0, "offline", "lab-q")
    create_run(conn, "run-elsewhere", 4, 0.0, "offline", "another-lab-q")
    now, lab = time.time(), {"signal": "SIGKILL", "queues": ["lab-q"]}
    killed = record_worker_event(conn, "chaos:temporal-server", 7, None, RUN, 2, json.dumps(lab), now + 1)
    cut = {**lab, "duration_s": 1.5}
    parted = record_worker_event(conn, "chaos:partition", None, None, RUN, 3, json.dumps(cut), now + 2)
    assert [e.id for e in iq.fleet_page(conn, "run-other")[0]] == [killed, parted]
    assert iq.fleet_page(conn, "run-elsewhere")[0] == []
    texts = [marker_text(e) for e in iq.fleet_page(conn, RUN)[0]]
    assert texts == [
        "── dev server killed (SIGKILL): Temporal down for every run of the lab ──",
        "── partition: every worker cut off from Temporal for 1.5 s ──",
    ]
    # filed without its queues, or with a hostile detail: it reaches no other run (as the audit reads it)
    for detail in ("{}", json.dumps({"queues": "lab-q"}), "[" * 100_000):
        record_worker_event(conn, "chaos:temporal-server", 7, None, RUN, 2, detail, now + 3)
    assert [e.id for e in iq.fleet_page(conn, "run-other")[0]] == [killed, parted]
    assert len(iq.fleet_page(conn, RUN)[0]) == 5  # its own run's: marked, with no words it cannot read


def test_a_page_of_another_lab_s_events_moves_the_marks_on(ledger_target, monkeypatch):
    """A full read of only another lab's lab-wide events (a shared ledger) is not the end: the feed pages
    on past it to the run's own marks."""
    monkeypatch.setattr(iq, "FLEET_MARKS_LIMIT", 5)
    conn = connect(ledger_target)
    create_run(conn, RUN, 4, 0.0, "offline", "lab-q")
    now, theirs = time.time(), json.dumps({"queues": ["another-lab-q"], "duration_s": 1.0})
    for i in range(12):
        record_worker_event(conn, "chaos:partition", None, None, "their-run", 1, theirs, now + 1 + i / 100)
    ours = record_worker_event(conn, "sigterm", 100, "w-a", detail=json.dumps(SIGTERM), at=now + 2)
    page, through, full = iq.fleet_page(conn, RUN)
    assert page == [] and full and through > 0  # read, none of them the run's
    assert [m.id for m in MarkFeed().new(conn, RUN, reset=True)[1]] == [ours]


def test_read_fleet_from_the_homes_files(tmp_path):
    cmd = (sys.executable, "-c", "pass")
    acts = FleetMember("fleet-activities", cmd)
    settings = Settings(
        home=tmp_path, task_queue_name="fleet-workflows", worker_cmd=cmd, pool_size=2, fleet=(acts,), deploys=(acts,)
    )
    settings.ensure_dirs()
    assert is_fleet(settings) and not is_fleet(Settings(home=tmp_path, worker_cmd=cmd))
    fleet_files.set_deployed(settings, "fleet-activities", True)
    until = time.time() + 60
    fleet_files.hold_down(settings, "fleet-activities", until)
    assert read_fleet(settings) == [
        FleetCommand("fleet-workflows", 0, 2),
        FleetCommand("fleet-activities", 0, 2, True, until),
    ]


async def test_a_background_read_is_paced_and_a_failure_shows_nothing():
    calls = []

    async def read(value):
        calls.append(value)
        if isinstance(value, Exception):
            raise value
        return value

    periodic = Periodic(every_s=3600)
    assert periodic.latest(lambda: read(3)) == (None, True)  # started; the poll does not wait for it
    await asyncio.sleep(0)
    assert periodic.latest(lambda: read(4)) == (3, False)  # its result; not due again for an hour
    periodic.every_s = 0
    assert periodic.latest(lambda: read(RuntimeError("describe failed"))) == (3, True)
    await asyncio.sleep(0)
    assert periodic.latest(lambda: read(5))[0] is None  # failed: nothing shown, no error raised
    await periodic.stop()
    assert calls[0] == 3 and 4 not in calls  # the read asked for while one was fresh was never made


class _AuditedTimeline(ActivityTimeline):
    """A user's workflow's timeline with no Temporal behind it: its activities are none."""

    async def activities(self, client, run_id, closed):
        return []


async def test_the_counts_come_from_the_audit_of_the_completion_sentence(tmp_path, monkeypatch):
    settings = Settings(home=tmp_path)
    session = LabSession(settings, UserWorkflow("FleetMailer"))
    session.client = object()  # asked of the timeline only
    audit = ActivityAudit(
        RUN,
        "FleetMailer",
        "COMPLETED",
        activities=4,
        completed=4,
        lost_work_count=1,
        lost_work={"lost": 1, "first": "send_receipt #2 timed out for good"},
    )
    try:
        s = snap([step(1)], 1, status="COMPLETED", run_status="completed")
        monkeypatch.setattr(activity_timeline, "audit_of", lambda *args: audit)  # the audit the sentence is of
        sentence = await session._completion_of(RUN, s, _AuditedTimeline("FleetMailer"))
        assert sentence == audit.sentence() and "work lost: send_receipt #2" in sentence
        assert session._counts[RUN] == RunCounts(0, 0, 0, 1)
    finally:
        await session.shutdown()
