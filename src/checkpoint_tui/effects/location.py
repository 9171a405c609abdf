"""Where the library's ledger and probe log are, and the one thread that talks to the ledger.

The location comes from the environment the lab sets for a worker it supervises (or a user sets by
hand): `CHECKPOINT_LEDGER_URL` (a PostgreSQL ledger) else `CHECKPOINT_HOME` (the home's SQLite file,
`run/checkpoint.db`, the same file the lab opens). The probe log is `CHECKPOINT_PROBE_LOG`, else
`CHECKPOINT_HOME/run/effects-probe.jsonl`.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger import store
from checkpoint_tui.settings import LEDGER_URL_ENV, PROBE_LOG_ENV, Settings, effects_env, is_postgres_url

PROBE_LOG_NAME = "effects-probe.jsonl"
T = TypeVar("T")


class EffectsConfigError(UsageError):
    """The environment does not say where the ledger or the probe log is."""


def ledger_target() -> str | Path:
    """What `ledger.store.connect` opens: the PostgreSQL URL, else the home's SQLite file."""
    env = effects_env()
    if env.ledger_url:
        if not is_postgres_url(env.ledger_url):
            raise EffectsConfigError(
                f"{LEDGER_URL_ENV} takes a postgresql:// URL (got {env.ledger_url.split(':', 1)[0][:20]}:...)"
            )
        return env.ledger_url
    if env.home is not None:
        return Settings(home=env.home).db_path
    raise EffectsConfigError(
        f"checkpoint_tui.effects cannot find its ledger: set {LEDGER_URL_ENV} (a postgresql:// URL) or "
        "CHECKPOINT_HOME (a checkpoint-tui home; its run/checkpoint.db is used)"
    )


def probe_log_path() -> Path:
    """Where every physical write is counted (see `probe`)."""
    env = effects_env()
    if env.probe_log is not None:
        return env.probe_log
    if env.home is not None:
        return Settings(home=env.home).run_dir / PROBE_LOG_NAME
    raise EffectsConfigError(
        f"checkpoint_tui.effects cannot find its probe log: set CHECKPOINT_HOME or {PROBE_LOG_ENV}"
    )


class LedgerThread:
    """Every ledger statement of the library runs on this one daemon thread, on one connection per
    ledger (`store.connect` caches per thread): neither a sqlite3 nor a psycopg connection may be
    shared between threads, and an async activity's event loop never waits on SQL (so its heartbeats
    keep beating while SQLite waits for its write lock). Sync activities on many threads queue here."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """A fresh state (also in a forked child, which has no ledger thread, and whose copy of the lock
        may have been held by a thread of the parent at the fork: it would never be released)."""
        self._lock = threading.Lock()
        self._inbox: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] | None = None
        self._pid = 0

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        future: Future[T] = Future()
        self._queue().put((fn, args, future))
        return future

    def close(self, timeout: float = 10.0) -> None:
        """Close the thread's ledger connections (tests; a worker shutting down)."""
        with self._lock:
            started = self._inbox is not None and self._pid == os.getpid()
        if started:
            self.submit(store.close_all).result(timeout)

    def _queue(self) -> queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]]:
        with self._lock:
            if self._inbox is None or self._pid != os.getpid():  # first use, or a forked child (no thread)
                self._inbox, self._pid = queue.SimpleQueue(), os.getpid()
                thread = threading.Thread(target=_serve, args=(self._inbox,), name="checkpoint-effects-ledger")
                thread.daemon = True  # a hung statement must not hold the worker's exit
                thread.start()
            return self._inbox


def _serve(inbox: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]]) -> None:
    while True:
        fn, args, future = inbox.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to the caller, who raises it
            future.set_exception(exc)


LEDGER = LedgerThread()
os.register_at_fork(after_in_child=LEDGER._reset)
