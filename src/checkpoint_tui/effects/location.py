"""Where the library's ledger and probe log are, and the one thread that talks to the ledger.

The location comes from the environment the lab sets for a worker it supervises (or a user sets by
hand): `CHECKPOINT_LEDGER_URL` (a PostgreSQL ledger) else `CHECKPOINT_HOME` (the home's SQLite file,
`run/checkpoint.db`, the same file the lab opens). The probe log is `CHECKPOINT_PROBE_LOG`, else
`CHECKPOINT_HOME/run/effects-probe.jsonl`.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from checkpoint_tui.effects.probe import OPEN_FLAGS
from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger import store
from checkpoint_tui.settings import (
    LEDGER_URL_ENV,
    PROBE_LOG_ENV,
    PROBE_LOG_NAME,
    EffectsEnv,
    Settings,
    check_private_dir,
    check_private_file,
    effects_env,
    is_postgres_url,
)

T = TypeVar("T")


class EffectsConfigError(UsageError):
    """The environment does not say where the ledger or the probe log is."""


def _environment() -> EffectsEnv:
    """The library's environment, its paths resolved: a path that cannot be (a symlink loop, which
    pathlib raises as RuntimeError; `~user` of no user; a relative one without a current folder) is a
    configuration error like any other, in one line."""
    try:
        return effects_env()
    except (OSError, RuntimeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise EffectsConfigError(
            f"checkpoint_tui.effects: CHECKPOINT_HOME or {PROBE_LOG_ENV} cannot be resolved: {shown(reason)}; "
            "set it to a folder (a file for the probe log) that exists or can be made"
        ) from None


def shown(path: object, limit: int = 160) -> str:
    """A path (or any text from the environment) fit for a one-line error: control characters escaped,
    a long one cut in its middle."""
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(path))
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-(limit // 2) :]}"


def ledger_target() -> str | Path:
    """What `ledger.store.connect` opens: the PostgreSQL URL, else the home's SQLite file."""
    env = _environment()
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
    env = _environment()
    if env.probe_log is not None:
        return env.probe_log
    if env.home is not None:
        return Settings(home=env.home).run_dir / PROBE_LOG_NAME
    raise EffectsConfigError(
        f"checkpoint_tui.effects cannot find its probe log: set CHECKPOINT_HOME or {PROBE_LOG_ENV}"
    )


def checked_location() -> tuple[str | Path, Path]:
    """(ledger target, probe log), checked before anything is claimed: the home's run/ as the CLI checks
    it (ours, not writable by others, not a link), the SQLite ledger a regular file of ours, and the
    probe log a regular file we can append to and fsync. A check that failed after the claim would
    leave it unstamped, and every retry would fail the same way without the write ever running."""
    env = _environment()
    target, probe = ledger_target(), probe_log_path()
    if env.home is not None and (not env.ledger_url or env.probe_log is None):  # the home's run/ is used
        run_dir = Settings(home=env.home).run_dir
        _checked(lambda: run_dir.mkdir(parents=True, exist_ok=True, mode=0o700), run_dir, "cannot create")
        _checked(lambda: check_private_dir(run_dir), run_dir, "cannot check")
    if not is_postgres_url(target):
        _checked(lambda: check_private_file(Path(target)), Path(target), "cannot check")
    check_probe_log(probe)
    return target, probe


def _checked(check: Callable[[], object], path: Path, what: str) -> None:
    """`check()`, its failure one EffectsConfigError line (`path` shown fit for it)."""
    try:
        check()
    except UsageError as err:
        raise EffectsConfigError(f"checkpoint_tui.effects: {str(err).replace(str(path), shown(path))}") from None
    except OSError as err:
        raise EffectsConfigError(f"checkpoint_tui.effects: {what} {shown(path)}: {err.strerror or err}") from None


_FSYNCED: set[tuple[int, int]] = set()  # probe logs (device, inode) this process has fsynced once


def check_probe_log(path: Path) -> None:
    """The probe log can be appended to and fsynced: a regular file (made if missing), not /dev/null
    (fsync fails there), a folder or a link. The fsync is tried once per file and process."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, OPEN_FLAGS | os.O_NONBLOCK, 0o600)
    except OSError as err:
        raise EffectsConfigError(
            f"checkpoint_tui.effects: the probe log {shown(path)} cannot be opened for appending "
            f"({err.strerror or err}); set {PROBE_LOG_ENV} to a file"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise EffectsConfigError(
                f"checkpoint_tui.effects: the probe log {shown(path)} is not a regular file; "
                f"set {PROBE_LOG_ENV} to a file"
            )
        if (st.st_dev, st.st_ino) not in _FSYNCED:
            try:
                os.fsync(fd)
            except OSError as err:
                raise EffectsConfigError(
                    f"checkpoint_tui.effects: the probe log {shown(path)} cannot be fsynced ({err.strerror or err})"
                ) from None
            _FSYNCED.add((st.st_dev, st.st_ino))
    finally:
        os.close(fd)


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
