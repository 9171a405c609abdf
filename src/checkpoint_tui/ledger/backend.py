"""One ledger interface, two backends: SQLite (the embedded default) and PostgreSQL (shared across hosts).

The SQL in this package is written once, in the subset both engines run the same way (`?` placeholders,
`INSERT ... ON CONFLICT`, `RETURNING`, CASE instead of two-argument MAX). The PostgreSQL backend only
rewrites placeholders and the two DDL spellings that differ (autoincrement keys, 8-byte floats). One
exception, behind `writes_in_with`: where a write pairs two statements in a transaction (the activity
log + step row, an effect's claim, its stamp), PostgreSQL runs them as one statement with the first in
a WITH clause, a round trip instead of four; SQLite has no writes in WITH and keeps the transaction.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.settings import is_postgres_url, postgres_label, postgres_parts

# transaction(key) on PostgreSQL takes an advisory lock on the key, the stand-in for SQLite's single
# writer lock (BEGIN IMMEDIATE), so a check-then-write block is serialised on both backends; only
# blocks with the same key queue behind each other. Without a key it is a plain transaction.


def redact_url(url: str) -> str:
    """The URL as libpq reads it, without its password (or any query), for errors and logs."""
    parts = postgres_parts(url)
    label = postgres_label(url)
    user = parts.get("user")
    if not user:
        return label
    secret = ":***" if parts.get("password") else ""
    return label.replace("postgresql://", f"postgresql://{user}{secret}@", 1)


# Bounds on a PostgreSQL session, so a stuck lock or a dead peer cannot stall an activity (its
# statements run on the worker's event loop, beside the heartbeats) for longer than a retry costs.
PG_SESSION: dict[str, Any] = {
    "options": "-c lock_timeout=1500 -c statement_timeout=15000 -c idle_in_transaction_session_timeout=30000",
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10000,  # ms: data the server never acknowledges fails the statement, too
}


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Ledger(Protocol):
    dialect: str
    target: str
    # Whether a WITH clause may hold INSERT/UPDATE (PostgreSQL): two writes then go as one statement,
    # atomic on its own, in one round trip instead of four (BEGIN, two writes, COMMIT). SQLite has no
    # such WITH; its writes are local calls, so it keeps the transaction.
    writes_in_with: bool

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor: ...

    def transaction(self, key: str | None = None, wait_s: float | None = None) -> Any: ...

    def data_version(self) -> object:
        """Changes whenever another connection commits; equal values mean nothing new to read."""

    def columns(self, table: str) -> set[str]: ...

    def ddl(self, statement: str) -> str: ...

    def close(self) -> None: ...


class SqliteLedger:
    dialect = "sqlite"
    writes_in_with = False

    def __init__(self, path: Path) -> None:
        if sqlite3.sqlite_version_info < (3, 35):
            raise Unavailable(
                f"the ledger needs SQLite 3.35 or newer (RETURNING); this Python has {sqlite3.sqlite_version}"
            )
        self.target = str(path)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _private_file(path)
        self.raw = sqlite3.connect(self.target, timeout=10.0, isolation_level=None, check_same_thread=True)
        self.raw.row_factory = sqlite3.Row
        self._set_wal()
        self.raw.execute("PRAGMA synchronous=NORMAL")
        self.raw.execute("PRAGMA busy_timeout=10000")

    def _set_wal(self) -> None:
        """WAL, so readers never block the worker. Switching a new file to WAL while another process
        does the same answers 'database is locked' at once (the busy timeout does not apply): retry."""
        deadline = time.monotonic() + 10.0
        while True:
            try:
                self.raw.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.raw.execute(sql, params)

    @contextmanager
    def transaction(self, key: str | None = None, wait_s: float | None = None) -> Iterator[None]:
        """BEGIN IMMEDIATE takes the (one) write lock up front, so check-then-write inside is atomic."""
        self.raw.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.raw.execute("ROLLBACK")
            raise
        self.raw.execute("COMMIT")

    def data_version(self) -> object:
        return self.raw.execute("PRAGMA data_version").fetchone()[0]

    def columns(self, table: str) -> set[str]:
        return {r[1] for r in self.raw.execute(f"PRAGMA table_info({table})")}

    def ddl(self, statement: str) -> str:
        return statement

    def close(self) -> None:
        self.raw.close()


def _private_file(path: Path) -> None:
    """The ledger is readable by its owner only (0600; SQLite gives its -wal and -shm files the same
    mode); a symlink planted in its place is refused. An existing ledger is never opened here: closing
    any descriptor of the file drops every POSIX lock this process holds on it, those of its other
    SQLite connections included (sqlite.org/howtocorrupt.html, 2.2), and another process closing its
    last connection would then checkpoint and delete the WAL under them (lost commits, a malformed file)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
            raise OSError(errno.ELOOP, "the ledger is not a regular file; refusing to open it", str(path)) from None
        if st.st_uid != os.geteuid():  # a ledger planted by someone else could hold stamps for our keys
            raise OSError(errno.EPERM, "the ledger is owned by another user; refusing to open it", str(path)) from None
        if st.st_mode & 0o077:
            os.chmod(path, 0o600)
        return
    os.close(fd)  # just created: no connection can hold a lock on it yet


class Row(tuple):
    """A result row readable by position and by column name, like sqlite3.Row."""

    _index: dict[str, int]

    def __new__(cls, values: Sequence[Any], index: dict[str, int]) -> Row:
        row = super().__new__(cls, values)
        row._index = index
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def row_factory_of(cursor: Any) -> Any:
    index = {c.name: i for i, c in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


@functools.lru_cache(maxsize=512)
def pg_sql(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresLedger:
    dialect = "postgresql"
    writes_in_with = True

    def __init__(self, url: str) -> None:
        self.target = redact_url(url)
        self._url = url
        self.raw = self._open()

    def _open(self) -> Any:
        import psycopg  # imported here: the embedded default never needs it

        try:
            return psycopg.connect(
                self._url, autocommit=True, row_factory=row_factory_of, connect_timeout=10, **PG_SESSION
            )
        except psycopg.OperationalError as exc:
            raise Unavailable(f"cannot open the PostgreSQL ledger at {self.target}: {exc}".strip()) from exc

    def _live(self) -> Any:
        """The connection, opened again if the server dropped it (a restart, a failover): the statement
        that saw it drop failed and its activity is retried; the retry must not meet the same corpse."""
        if self.raw.broken or self.raw.closed:
            self.raw = self._open()
        return self.raw

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        import psycopg

        try:
            return self._live().execute(pg_sql(sql), tuple(params))
        except psycopg.OperationalError as exc:  # the server went away, or a lock/statement timeout
            what = "dropped the connection" if self.raw.broken or self.raw.closed else "refused the statement"
            raise Unavailable(f"the PostgreSQL ledger at {self.target} {what}: {exc}".strip()) from exc

    @contextmanager
    def transaction(self, key: str | None = None, wait_s: float | None = None) -> Iterator[None]:
        """`wait_s` lifts the session's short lock_timeout for this transaction (schema migrations,
        where a host waits its turn behind another host's)."""
        with self._live().transaction():
            if wait_s is not None:
                self.raw.execute(f"SET LOCAL lock_timeout = {int(wait_s * 1000)}")
            if key is not None:  # through execute(): a lock timeout is one clear error like any other
                self.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (key,))
            yield

    def data_version(self) -> object:
        # Moves on every write anywhere in the cluster: a conservative "something may have changed".
        return self._live().execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]

    def columns(self, table: str) -> set[str]:
        rows = self._live().execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = %s",
            (table,),
        )
        return {r[0] for r in rows}

    def ddl(self, statement: str) -> str:
        statement = statement.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
        return re.sub(r"\bREAL\b", "DOUBLE PRECISION", statement)  # PostgreSQL's REAL is 4 bytes

    def close(self) -> None:
        self.raw.close()


def open_ledger(target: str | Path) -> Ledger:
    if is_postgres_url(target):
        return PostgresLedger(str(target))
    return SqliteLedger(Path(target))
