"""The instrument's reads (ledger/inspect_queries.py) on both ledger backends: the worker processes
that completed steps, kills with the dead worker's last attempt, one step in full, truncated answers."""

from __future__ import annotations

import time

from checkpoint_tui.ledger import inspect_queries as iq
from checkpoint_tui.ledger.effects import KINDS, EffectSpec, apply_effect_once
from checkpoint_tui.ledger.store import connect, create_run, record_worker_event, touch_step, upsert_step
from checkpoint_tui.settings import HOST

RUN = "run-20260101-000000-beef"


def seed(conn) -> float:
    """Steps 1-2 by pid 100, step 3's model call on 100 killed, then finished by 200."""
    create_run(conn, RUN, 4, 0.0, "offline", "q")
    for step in (1, 2):
        touch_step(conn, RUN, step, "llm", 1, 100, "running")
        touch_step(conn, RUN, step, "mark_step_completed", 1, 100, "completed", ended_at=time.time())
    touch_step(conn, RUN, 3, "llm", 1, 100, "running")
    time.sleep(0.01)
    killed_at = time.time()
    record_worker_event(conn, "kill", 100, "w-abc123@elsewhere", RUN, 3, '{"signal": "SIGKILL"}', killed_at)
    time.sleep(0.01)
    touch_step(conn, RUN, 3, "llm", 2, 200, "running")
    upsert_step(conn, RUN, 3, "running", action="compute", thought="t", answer_note="truncated; repaired")
    for kind in KINDS:
        apply_effect_once(conn, EffectSpec(RUN, 3, kind, f"payload {kind}", 2, 200, RUN), lambda spec, rec: None)
    touch_step(conn, RUN, 3, "mark_step_completed", 2, 200, "completed", ended_at=time.time())
    return killed_at


def test_instrument_reads(ledger_target):
    conn = connect(ledger_target)
    killed_at = seed(conn)
    assert iq.finisher_count(conn, RUN) == 2
    kills = iq.kill_events(conn, RUN)
    assert len(kills) == 1
    k = kills[0]
    assert (k.event, k.pid, k.signal, k.step) == ("kill", 100, "SIGKILL", 3)
    assert (k.activity, k.attempt, k.activity_step) == ("llm", 1, 3)  # the dead worker's own attempt
    assert abs(k.at - killed_at) < 1e-3 and k.identity == "w-abc123@elsewhere"
    assert iq.kill_events(conn, RUN, [k.id]) == kills and iq.kill_events(conn, RUN, []) == []
    steps, truncated = iq.steps_with_notes(conn, RUN)
    assert [s.step for s in steps] == [1, 2, 3] and truncated == [3]
    detail = iq.step_detail(conn, RUN, 3)
    assert detail is not None and detail.truncated and detail.step.worker_pid == 200
    assert sorted(e.kind for e in detail.effects) == ["db", "email", "file"]
    assert all(e.outcomes == "applied" and e.payload.startswith("payload") for e in detail.effects)
    assert [c.outcome for c in detail.claims] == ["applied"] * 3
    assert [(a.activity, a.attempt, a.worker_pid) for a in detail.attempts] == [
        ("llm", 1, 100),
        ("llm", 2, 200),
        ("mark_step_completed", 2, 200),
    ]
    assert iq.step_detail(conn, RUN, 4) is None


def test_a_death_marks_every_run_its_worker_served(ledger_target):
    """start --runs N: one kill files its event under one run, but it interrupted every run the dead
    worker served. The app asks with served=True: a run whose latest attempt before the death was the
    dead worker's, while the run was not over, gets the death too (with that attempt); a run on
    another worker, one that had moved on to another worker since, or one that had ended, does not."""
    conn = connect(ledger_target)
    seed(conn)  # pid 100 killed at step 3 of RUN
    killed_at = iq.kill_events(conn, RUN)[0].at
    other, elsewhere, moved, ended = (RUN.replace("beef", tail) for tail in ("cafe", "f00d", "abba", "dead"))
    for run in (other, elsewhere, moved, ended):
        create_run(conn, run, 4, 0.0, "offline", "q")
    for run, pid, before in (
        (other, 100, 0.005),
        (elsewhere, 300, 0.005),
        (moved, 100, 0.006),
        (moved, 300, 0.004),
        (ended, 100, 0.005),
    ):
        conn.execute(
            "INSERT INTO activity_log(run_id, step, activity, attempt, worker_pid, host, started_at) "
            "VALUES(?, 2, 'tool', 1, ?, ?, ?)",
            (run, pid, HOST, killed_at - before),
        )
    conn.execute("UPDATE runs SET status = 'completed', ended_at = ? WHERE run_id = ?", (killed_at - 0.001, ended))
    assert iq.kill_events(conn, other) == []  # filed under RUN only
    (k,) = iq.kill_events(conn, other, served=True)
    assert (k.pid, k.activity, k.activity_step, k.step) == (100, "tool", 2, 3)  # other's attempt, RUN's step
    assert iq.kill_events(conn, other, [k.id], served=True) == [k]
    assert all(iq.kill_events(conn, run, served=True) == [] for run in (elsewhere, moved, ended))
    assert iq.deaths_after(conn, 0) == [k.id] and iq.deaths_after(conn, k.id) == []
    assert iq.last_event_id(conn) >= k.id
    assert [e.id for e in iq.kill_events(conn, RUN, served=True)] == [k.id]
