"""Our loop's `kill_at:STEP` fault (ledger/faults.py): due once the step's model call is in flight on
one of the supervisor's workers, so that the kill lands inside it."""

from __future__ import annotations

from collections.abc import Iterable

from checkpoint_tui.ledger import faults, queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.settings import HOST, Settings


def due(settings: Settings, workers: Iterable[WorkerProc]) -> tuple[bool, bool, tuple[WorkerProc, int] | None]:
    """(a kill_at fault is armed, a run is running, the worker to kill now and the step, if one is due).
    A fault is consumed as it is found due: it fires once."""
    conn = connect(settings.ledger)
    armed, live = faults.armed_kill_steps(conn)
    workers = list(workers)
    for run_id, step in armed:
        for worker in workers:
            if (
                queries.activity_logged(conn, run_id, step, "llm", worker.pid, HOST)
                and worker.alive()
                and faults.consume(conn, run_id, step, "kill_at")
            ):
                return bool(armed), live, (worker, step)
    return bool(armed), live, None
