"""The ledger as the worker's activities reach it: `await ledger.run(fn, *args)` does what
`fn(conn, *args)` does.

On SQLite that is the call itself: the engine runs in this process and a write is a local call.
On PostgreSQL, a function marked with a plan (`ledger.plans.runs`) runs that plan on asyncio
connections (`ledger/backend_async.py`), so the event loop that carries every activity, workflow
activation and heartbeat of this worker never waits for a round trip; one without a plan (a
transaction under an advisory lock, which needs one connection for its span) runs blocking, as
everywhere else. Both ways run the same SQL: the plain function runs its plan too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.backend_async import AsyncPostgres
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.settings import is_postgres_url


class ActivityLedger:
    def __init__(self, target: str | Any) -> None:
        self._target = target  # a path or a URL that may hold a password: never shown
        self._pg = AsyncPostgres(str(target)) if is_postgres_url(target) else None

    @property
    def conn(self) -> Ledger:
        """This thread's blocking connection (opened and migrated on first use)."""
        return connect(self._target)

    async def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        plan = getattr(fn, "plan", None)
        if self._pg is None or plan is None:
            return fn(self.conn, *args, **kwargs)
        return await self._pg.run(plan(*args, **kwargs))

    async def close(self) -> None:
        if self._pg is not None:
            await self._pg.close()
