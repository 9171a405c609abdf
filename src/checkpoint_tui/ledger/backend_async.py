"""PostgreSQL on asyncio connections, for the ledger plans a worker's activities run.

Why: a worker runs every activity, workflow activation and heartbeat of its runs on one event loop.
A blocking statement holds that loop for its round trip and the commit's WAL flush (0.3-0.7 ms each
on an idle machine, 13 a step on average), so at 16 runs at once blocking statements held the loop
about 15 % of the wall time (py-spy over the worker, `bench/throughput.py --ledger`). Awaited, the
wait lets the loop run the other runs' work, and commits from several connections share a WAL flush
(group commit). Each statement is still its own atomic autocommit, exactly as on the blocking
connection: nothing the ledger promises depends on which connection carries it.

A statement, once sent, is run to its end even if the awaiting task is cancelled (a pause or a reset
reaching the activity): its connection is then clean for the next one, and the cancellation is
raised after it, as it would be after a blocking call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger.backend import PG_SESSION, pg_sql, redact_url, row_factory_of
from checkpoint_tui.ledger.plans import Plan, PlanError, Stmt, drive_async
from checkpoint_tui.waiting import to_the_end

POOL_SIZE = 4  # connections per worker: enough for concurrent commits to share a flush
TAKE_S = 60.0  # the longest wait for a free connection: four statement timeouts (15 s) in a row


class Result:
    """A statement's rows, fetched whole (they are a few), and its rowcount: what plans read."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self.rows, self.rowcount = rows, rowcount

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return list(self.rows)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)


class AsyncPostgres:
    """Up to `size` asyncio connections to one PostgreSQL ledger, opened on first use in the running
    loop, with the blocking backend's session bounds (lock and statement timeouts, keepalives)."""

    def __init__(self, url: str, size: int = POOL_SIZE) -> None:
        self._url, self.target, self._size = url, redact_url(url), size
        self._idle: list[Any] = []
        self._opened = 0
        self._free: asyncio.Condition | None = None

    async def run(self, plan: Plan[Any]) -> Any:
        return await drive_async(plan, self._answer)

    def _answer(self, request: Any) -> Any:
        if isinstance(request, Stmt):
            return self.execute(request.sql, request.params)
        raise PlanError(f"a ledger plan asked for {type(request).__name__}, not a statement")

    async def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        return await to_the_end(self._execute(sql, params))  # bounded by the statement_timeout

    async def _execute(self, sql: str, params: Sequence[Any]) -> Result:
        import psycopg

        conn = await self._take()
        try:
            cur = await conn.execute(pg_sql(sql), tuple(params))
            rows = await cur.fetchall() if cur.description is not None else []
            return Result(rows, cur.rowcount)
        except psycopg.OperationalError as exc:  # the server went away, or a lock/statement timeout
            what = "dropped the connection" if conn.broken or conn.closed else "refused the statement"
            raise Unavailable(f"the PostgreSQL ledger at {self.target} {what}: {exc}".strip()) from exc
        finally:
            await self._give(conn)

    async def _take(self) -> Any:
        free = self._condition()
        async with free:
            try:  # each holder's statement ends within the statement_timeout: waiting longer is a fault
                await asyncio.wait_for(free.wait_for(lambda: self._idle or self._opened < self._size), TAKE_S)
            except TimeoutError:
                raise Unavailable(
                    f"no connection to the PostgreSQL ledger at {self.target} came free within {TAKE_S:g} s"
                ) from None
            if self._idle:
                return self._idle.pop()
            self._opened += 1
        try:
            return await self._open()
        except BaseException:
            async with free:
                self._opened -= 1
                free.notify()
            raise

    async def _give(self, conn: Any) -> None:
        free = self._condition()
        async with free:
            if conn.broken or conn.closed:
                # A dropped connection is not reused, nor are the idle ones: what dropped it (a restart,
                # a failover) dropped them too, and each would fail one more activity's statement.
                stale, self._idle = self._idle, []
                self._opened -= 1 + len(stale)
                for other in stale:
                    with contextlib.suppress(Exception):
                        await other.close()
            else:
                self._idle.append(conn)
            free.notify_all()

    def _condition(self) -> asyncio.Condition:
        if self._free is None:
            self._free = asyncio.Condition()
        return self._free

    async def _open(self) -> Any:
        import psycopg

        try:
            return await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, row_factory=row_factory_of, connect_timeout=10, **PG_SESSION
            )
        except psycopg.OperationalError as exc:
            raise Unavailable(f"cannot open the PostgreSQL ledger at {self.target}: {exc}".strip()) from exc

    async def close(self) -> None:
        """Close the idle connections (one in use is given back, and kept, when its statement ends)."""
        idle, self._idle = self._idle, []
        self._opened -= len(idle)
        for conn in idle:
            with contextlib.suppress(Exception):
                await conn.close()
