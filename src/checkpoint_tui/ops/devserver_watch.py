"""The supervisor's watch over the home's dev server: it is ours, so if it died it is started again on
the same ports and database. Workers and clients reconnect by themselves; the run continues from
persisted history. Each death and restart is a worker event (the app's markers read them)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import devserver
from checkpoint_tui.settings import Settings


async def revive(settings: Settings, on_down: Callable[[], None]) -> tuple[int | None, bool]:
    """(the dev server's pid, None while it is down; whether it was restarted now). `on_down` is
    called once it is found dead, before the restart (which takes seconds)."""
    ident, rec = devserver.recorded(settings)
    if ident is not None or rec is None:
        return (ident.pid if ident is not None else None), False
    died_at = time.time()
    on_down()
    conn = connect(settings.ledger)
    record_worker_event(conn, "temporal-died", rec["identity"]["pid"], None, detail=rec.get("address"), at=died_at)
    try:
        server = await asyncio.to_thread(devserver.ensure_devserver, settings)
    except Exception as err:  # unavailable binary, ports taken...: say so, retry on a later tick
        record_worker_event(conn, "temporal-restart-failed", None, None, detail=str(err))
        return None, False
    back = f"{server.address} back after {time.time() - died_at:.2f} s"
    record_worker_event(conn, "temporal-restart", server.pid, None, detail=back)
    return server.pid, True
