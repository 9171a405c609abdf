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


class Passes:
    """The passes a Failover starts, recorded in place of the real ones: the first holds until `go_on`,
    then ends (or raises `first_raises`)."""

    def __init__(self, monkeypatch, first_raises: Exception | None = None, assist: bool | str = True) -> None:
        self.first: list[list[int]] = []
        self.failing: list[bool] = []  # each first pass's `fail`
        self.late: list[list[int]] = []
        self.first_asked, self.go_on = asyncio.Event(), asyncio.Event()
        self.raises = first_raises
        monkeypatch.setattr(failover, "assist", self._assist)
        monkeypatch.setattr(failover, "assist_late", self._late)
        self.tasks = Background()
        self.failover = failover.Failover(SimpleNamespace(), SimpleNamespace(), self.tasks, assist)

    async def _assist(self, settings, client, batch, late=False, fail=True):
        self.first.append([w.pid for w in batch])
        self.failing.append(fail)
        if len(self.first) == 1:
            self.first_asked.set()
            await self.go_on.wait()
            if self.raises is not None:
                raise self.raises

    async def _late(self, settings, client, batch):
        self.late.append([w.pid for w in batch])


def worker(pid: int) -> SimpleNamespace:
    return SimpleNamespace(pid=pid, name=f"{pid}@h")


async def test_deaths_during_a_pass_share_the_next_pass_and_each_gets_its_late_pass(monkeypatch):
    """Three deaths: the first starts a pass; the two seen while it runs are asked together after it,
    not each in a pass of its own beside it (a replacement that died for want of a restarting dev
    server used to send every run's describe and sticky reset into it again)."""
    passes = Passes(monkeypatch)
    passes.failover.dead(worker(1))
    await asyncio.wait_for(passes.first_asked.wait(), 5)
    passes.failover.dead(worker(2))
    passes.failover.dead(worker(3))
    assert passes.first == [[1]]  # the two wait for the pass in flight
    passes.go_on.set()
    await passes.tasks.drain(5.0)
    assert passes.first == [[1], [2, 3]] and passes.late == [[1], [2, 3]]
    passes.failover.dead(worker(1))  # a pass after the others ended starts at once
    await passes.tasks.drain(5.0)
    assert passes.first[-1] == [1]


async def test_with_chaos_s_hop_failing_the_attempts_a_pass_only_resets_sticky_queues(monkeypatch):
    """`supervise --attempts-by-hop` (chaos with its hop, proof/nemeses/handed.py): the pass fails no attempt
    by id (that would fail the retry the hop's failure started on a live worker) and has no late pass,
    which only fails attempts."""
    passes = Passes(monkeypatch, assist=failover.STICKY_ONLY)
    passes.failover.dead(worker(1))
    await asyncio.wait_for(passes.first_asked.wait(), 5)
    passes.go_on.set()
    await passes.tasks.drain(5.0)
    assert passes.first == [[1]] and passes.failing == [False] and passes.late == []


async def test_a_failed_pass_keeps_its_late_pass_and_the_deaths_after_it_theirs(monkeypatch):
    """The ledger away under a pass (locked, its server down): logged, its late pass still asks again,
    the deaths seen meanwhile get their own pass, and a worker recorded twice is asked for once."""
    passes = Passes(monkeypatch, first_raises=RuntimeError("database is locked"))
    passes.failover.dead(worker(1))
    await asyncio.wait_for(passes.first_asked.wait(), 5)
    passes.failover.dead(worker(1))  # the same process, recorded again: already asked for
    passes.failover.dead(worker(2))
    passes.failover.dead(worker(2))
    passes.go_on.set()
    await passes.tasks.drain(5.0)
    assert passes.first == [[1], [2]] and passes.late == [[1], [2]]


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
