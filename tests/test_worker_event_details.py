"""A worker event's JSON detail is read back from the ledger, which is anyone's who can write the home
(a shared PostgreSQL ledger: anyone with its password): every reader goes through ledger.rows.detail_of,
bounded, and a hostile row (100k brackets, one over the size limit, not an object) reads as no detail
instead of a RecursionError out of the audit or a pane."""

from __future__ import annotations

import json
import time

import pytest

from checkpoint_tui.ledger import inspect_queries, queries
from checkpoint_tui.ledger.fleet_queries import detail_text
from checkpoint_tui.ledger.rows import DETAIL_LIMIT, WorkerEvent, detail_of
from checkpoint_tui.ledger.store import connect, create_run, record_worker_event
from checkpoint_tui.proof.nemeses.processes import hang_kill_at
from checkpoint_tui.tui.panes.worker_events import describe

HOSTILE = [
    "[" * 100_000,  # nested past the parser's reason
    "{" * 100_000,
    json.dumps({"signal": "SIGKILL", "pad": "x" * DETAIL_LIMIT}),  # over the limit
    json.dumps(["SIGKILL"]),  # not an object
    "not json",
]


@pytest.mark.parametrize("text", HOSTILE, ids=["brackets", "braces", "over-limit", "list", "text"])
def test_a_hostile_detail_reads_as_none_in_every_reader(tmp_path, text):
    conn = connect(tmp_path / "checkpoint.db")
    create_run(conn, "r", 3, 0.0, "offline", "q")
    now = time.time()
    record_worker_event(conn, "kill", 4242, None, "r", 1, text, now)
    assert detail_of(text) == {}
    assert [e["detail"] for e in queries.death_events(conn, "r")] == [{}]  # what the audits read
    assert [e["detail"] for e in queries.lab_events(conn, now - 1, now + 1)] == [{}]
    assert hang_kill_at(conn, 4242, now - 1) == (now, None)
    assert detail_text(text, "signal") is None
    (row,) = conn.execute("SELECT * FROM worker_events").fetchall()
    assert "killed" in describe(WorkerEvent.of(row))  # the pane's line, with no signal it cannot read
    assert inspect_queries.kill_events(conn, "r")[0].pid == 4242


def test_a_detail_of_ours_reads_whole(tmp_path):
    """The largest of ours: an assist at load names each run once (~30 characters each, 1,000 runs)."""
    ours = {"signal": "SIGKILL", "reason": "no liveness beat", "sticky_reset": [f"run-{n:026d}" for n in range(1000)]}
    text = json.dumps(ours)
    assert len(text) < DETAIL_LIMIT and detail_of(text) == ours
    conn = connect(tmp_path / "checkpoint.db")
    record_worker_event(conn, "kill", 7, None, "r", 1, text, 1.0)
    assert hang_kill_at(conn, 7, 0.0) == (1.0, "no liveness beat") and detail_text(text, "signal") == "SIGKILL"


@pytest.mark.parametrize(
    "detail",
    [{"failed_activities": 5}, {"failed_activities": None, "sticky_reset": 7}, {"sticky_reset_count": "many"}],
)
def test_an_assist_of_the_wrong_shape_is_shown_not_raised(detail):
    """A JSON object whose lists are not lists (a hostile row): the pane's line counts what it can."""
    row = WorkerEvent(1, 1.0, "assist", 4242, None, None, json.dumps(detail), None, None)
    assert describe(row).startswith("assist for 4242: failed 0 pending activity attempt(s) by id")


def test_an_assist_at_load_names_a_thousand_runs_and_counts_them_all():
    row = WorkerEvent(
        1,
        1.0,
        "assist",
        7,
        None,
        None,
        json.dumps(
            {
                "failed_activities": ["a"] * 1000,
                "failed_activities_count": 5000,
                "sticky_reset": [],
                "sticky_reset_count": 0,
            }
        ),
        None,
        None,
    )
    assert "failed 5000 pending activity attempt(s) by id, reset 0 run(s)' sticky queue" in describe(row)


@pytest.mark.parametrize(
    ("extra", "said"),
    [({}, "by task token (chaos's hop)"), ({"by_id": True, "late": True}, "by id (the hop's late pass)")],
)
def test_the_hop_s_assist_says_how_it_failed_and_claims_no_sticky_reset(extra, said):
    detail = {"failed_activities": ["r:send_line#1"], "failed_activities_count": 1, "by": "hop", **extra}
    row = WorkerEvent(1, 1.0, "assist", 7, None, None, json.dumps(detail), None, None)
    assert describe(row) == f"assist for 7: failed 1 pending activity attempt(s) {said}"
