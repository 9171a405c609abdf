"""Assisted failover at load (ops/failover.py): one pass at a time for every worker seen dead since the
last began, and the runs most likely to hold a dead worker's attempt asked first."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect, create_run, finish_run
from checkpoint_tui.ops import failover
from checkpoint_tui.ops.loop_thread import Background

QUEUE = "q-failover"


async def test_deaths_during_a_pass_share_the_next_pass_and_each_gets_its_late_pass(monkeypatch):
    """Three deaths: the first starts a pass; the two seen while it runs are asked together after it,
    not each in a pass of its own beside it (a replacement that died for want of a restarting dev
    server used to send every run's describe and sticky reset into it again)."""
    passes: list[list[int]] = []
    late: list[list[int]] = []
    first_asked, go_on = asyncio.Event(), asyncio.Event()

    async def fake_assist(settings, client, batch, late_pass=False):
        passes.append([w.pid for w in batch])
        if len(passes) == 1:
            first_asked.set()
            await go_on.wait()

    async def fake_late(settings, client, batch):
        late.append([w.pid for w in batch])

    monkeypatch.setattr(failover, "assist", fake_assist)
    monkeypatch.setattr(failover, "assist_late", fake_late)
    tasks = Background()
    passing = failover.Failover(SimpleNamespace(), SimpleNamespace(), tasks)
    w1, w2, w3 = (SimpleNamespace(pid=pid, name=f"{pid}@h") for pid in (1, 2, 3))
    passing.dead(w1)
    await asyncio.wait_for(first_asked.wait(), 5)
    passing.dead(w2)
    passing.dead(w3)
    assert passes == [[1]]  # the two wait for the pass in flight
    go_on.set()
    await tasks.drain(5.0)
    assert passes == [[1], [2, 3]] and late == [[1], [2, 3]]
    passing.dead(w1)  # a pass after the others ended starts at once
    await tasks.drain(5.0)
    assert passes[-1] == [1]


async def test_a_failed_pass_keeps_its_late_pass_and_the_deaths_after_it_theirs(monkeypatch):
    """The ledger away under a pass (locked, its server down): logged, its late pass still asks again,
    the deaths seen meanwhile get their own pass, and a worker recorded twice is asked for once."""
    passes: list[list[int]] = []
    late: list[list[int]] = []
    first_asked, go_on = asyncio.Event(), asyncio.Event()

    async def failing_assist(settings, client, batch, late_pass=False):
        passes.append([w.pid for w in batch])
        if len(passes) == 1:
            first_asked.set()
            await go_on.wait()
            raise RuntimeError("database is locked")

    async def fake_late(settings, client, batch):
        late.append([w.pid for w in batch])

    monkeypatch.setattr(failover, "assist", failing_assist)
    monkeypatch.setattr(failover, "assist_late", fake_late)
    tasks = Background()
    passing = failover.Failover(SimpleNamespace(), SimpleNamespace(), tasks)
    w1, w2 = (SimpleNamespace(pid=pid, name=f"{pid}@h") for pid in (1, 2))
    passing.dead(w1)
    await asyncio.wait_for(first_asked.wait(), 5)
    passing.dead(SimpleNamespace(pid=1, name="1@h"))  # the same process, recorded again: already asked for
    passing.dead(w2)
    passing.dead(SimpleNamespace(pid=2, name="2@h"))
    go_on.set()
    await tasks.drain(5.0)
    assert passes == [[1], [2]] and late == [[1], [2]]


async def test_a_drain_is_bounded_in_all_and_cancels_what_is_left():
    """A stop waits `within_s` in all for what the supervisor started (work started by work that landed
    included), not that per piece of work."""
    tasks, ended = Background(), []

    async def quick_then_more():
        await asyncio.sleep(0.05)
        tasks.start(slow())  # a first pass starting its late pass

    async def slow():
        try:
            await asyncio.sleep(30)
        finally:
            ended.append("slow")

    tasks.start(quick_then_more())
    tasks.start(slow())
    began = asyncio.get_running_loop().time()
    await tasks.drain(0.5)
    await asyncio.sleep(0)  # the cancellations land
    assert asyncio.get_running_loop().time() - began < 2.0 and ended == ["slow", "slow"]


def test_the_runs_with_a_tool_call_in_flight_are_asked_first(ledger_target):
    """A claim not stamped first, then a run with no effect yet, then the effects that moved last; runs
    that ended, or of another queue, are not asked."""
    conn = connect(ledger_target)
    for run_id in ("r-idle", "r-recent", "r-open", "r-fresh", "r-done"):
        create_run(conn, run_id, 3, 0.0, "offline", QUEUE)
    create_run(conn, "r-other-lab", 3, 0.0, "offline", "another-queue")
    finish_run(conn, "r-done", "completed")
    effect = "INSERT INTO effects(id, run_id, step, kind, payload, attempt, claimed_at, applied_at) VALUES"
    effect += "(?,?,?,?,?,?,?,?)"
    for key, run_id, claimed, applied in [
        ("k1", "r-idle", 100.0, 100.5),
        ("k2", "r-recent", 100.0, 100.5),
        ("k3", "r-recent", 200.0, 200.5),
        ("k4", "r-open", 100.0, 100.5),
        ("k5", "r-open", 150.0, None),
        ("k6", "r-other-lab", 300.0, None),
    ]:
        conn.execute(effect, (key, run_id, 1, "line", "x", 1, claimed, applied))
    assert queries.running_runs(conn, QUEUE, busiest_first=True) == ["r-open", "r-fresh", "r-recent", "r-idle"]
    assert sorted(queries.running_runs(conn, QUEUE)) == ["r-fresh", "r-idle", "r-open", "r-recent"]
