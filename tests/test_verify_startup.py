"""--verify's scenarios start a supervisor with a worker and a warm spare and wait until both are
connected. A start-up that fails there (here: a wait of 0 s, which no real worker meets) must stop the
processes it started and release the home, not leave them for the rest of the session."""

from __future__ import annotations

import psutil
import pytest

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.proof.report import Report
from checkpoint_tui.proof.verify.plan import VerifyContext
from checkpoint_tui.workloads import AgentLoopWorkload, agent_loop


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def test_a_failed_start_stops_the_worker_and_spare_it_spawned(home, client, temporal_address, monkeypatch):
    monkeypatch.setattr(agent_loop, "READY_TIMEOUT_S", 0.0)  # spawned, never ready in time
    ctx = VerifyContext(home, temporal_address, client, Report(), AgentLoopWorkload())
    with pytest.raises(Unavailable, match="did not connect"):
        await ctx.supervise()
    spawned = [e.pid for e in queries.worker_events(connect(home.ledger), None) if e.event == "spawn"]
    assert len(spawned) == 2  # the worker and the warm spare, both started before the wait failed
    assert all(pid is not None and gone(pid) for pid in spawned), spawned
    assert worker_proc.load_all(home) == [] and ctx.sup is None
    other = Supervisor(home, temporal_address)
    assert other.acquire()  # the home's supervisor lock was released
    other.release()
