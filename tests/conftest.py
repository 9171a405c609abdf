"""Shared fixtures. Every process a test starts lives under one session temp root, so the session-end
check can prove none was left running (and stop any that was, by identity, before failing)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import psutil
import pytest
from temporalio.client import Client

from checkpoint_tui.ledger.store import close_all
from checkpoint_tui.ops.devserver import ensure_devserver, stop_devserver
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.ops.temporal import connect_client
from checkpoint_tui.settings import Settings
from cli_zygote import Zygote
from pg_server import SKIP_ENV, PgServer, pg_bindir, running_server

_ROOT: Path | None = None
_ZYGOTE: Zygote | None = None
FORK_CLI = os.environ.get("CHECKPOINT_TESTS_FORK_CLI", "1") != "0"  # 0: each run_cli a fresh interpreter


@pytest.fixture(scope="session")
def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    global _ROOT
    _ROOT = tmp_path_factory.mktemp("ckpt")
    return _ROOT


@pytest.fixture(scope="session")
def server_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A home that owns the session's embedded dev server (real `temporal server start-dev`), one for
    all the xdist workers: an idle dev server costs 3-5 % of a core, six of them a third of one. Each
    test's home has its own task queue, so they share it as the tests of one worker always have. The
    workers count themselves in under a lock; the last one out stops it (one that comes in later starts
    it again: ensure_devserver adopts a live one, else starts one, under the home's own lock)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's root, above popen-gwN
    settings = Settings(home=shared / "shared-server-home")
    settings.ensure_dirs()
    with _users(settings) as users:
        users.write_text(str(int(users.read_text() or 0) + 1))
        ensure_devserver(settings)
    yield settings
    with _users(settings) as users:
        left = int(users.read_text() or 1) - 1
        users.write_text(str(left))
        if left == 0:
            stop_devserver(settings, grace=2.0)  # a session's worth of runs: its graceful stop can take 10 s+


@contextlib.contextmanager
def _users(settings: Settings) -> Iterator[Path]:
    """The shared server's count of pytest processes using it, held under an exclusive lock."""
    import fcntl

    path = settings.run_dir / "users"
    path.touch()
    with open(settings.run_dir / "users.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield path


@pytest.fixture(scope="session")
def temporal_address(server_home: Settings) -> str:
    from checkpoint_tui.ops.procs import read_json

    rec = read_json(server_home.run_dir / "devserver.json")
    assert rec is not None
    return rec["address"]


@pytest.fixture
def server():
    """A stand-in OpenAI-compatible server (tests/model_server.py), the model layer's caches cleared."""
    from checkpoint_tui.model import openai_compat
    from model_server import StandIn

    openai_compat._models_cache.clear()
    openai_compat._plain_only.clear()
    s = StandIn().start()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """One real PostgreSQL server for the session (see pg_server.py)."""
    bindir = pg_bindir()
    if bindir is None:
        if os.environ.get(SKIP_ENV):
            pytest.skip(f"PostgreSQL binaries not found and {SKIP_ENV} is set")
        pytest.fail(
            "PostgreSQL server binaries (Debian's postgresql package) not found: `make test` installs them "
            f"when run as root; set {SKIP_ENV}=1 to skip the PostgreSQL half of the suite"
        )
    with running_server(bindir) as server:
        yield server


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A fresh PostgreSQL database for one test."""
    yield pg_server.new_database()
    close_all()


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same test against both ledger backends."""
    if request.param == "sqlite":
        yield str(tmp_path / "run" / "checkpoint.db")
    else:
        yield request.getfixturevalue("pg_url")
    close_all()


@pytest.fixture(params=["agent-loop", "workflow"])
def lab(request: pytest.FixtureRequest):
    """The same test for both workloads: our loop and a user's workflow (tests/labs.py)."""
    from labs import LABS

    return LABS[request.param]


_counter = iter(range(10_000))


@pytest.fixture
def home(session_root: Path, temporal_address: str) -> Settings:
    """A fresh home (own ledger, artifacts, task queue) on the shared dev server."""
    settings = Settings(home=session_root / f"home-{next(_counter)}", temporal_address=temporal_address)
    settings.ensure_dirs()
    return settings


@pytest.fixture
async def client(home: Settings, temporal_address: str):
    return await connect_client(home, temporal_address)


@pytest.fixture
async def supervisor(home: Settings, client, temporal_address: str) -> AsyncIterator[Supervisor]:
    sup = Supervisor(home, temporal_address)
    assert sup.acquire()
    try:
        sup.ensure_worker()
        async with sup.running(stop_workers=True):
            yield sup
    finally:
        await sup.stop(stop_workers=True)  # also when ensure_worker failed half-way


def queue_of(prefix: str, home: Path) -> str:
    """A task queue of this home alone: homes of parallel xdist workers share names (`home`,
    `uw-activity-0`) and every one of them may be on the session's one dev server."""
    return f"{prefix}-{home.name}-{hashlib.sha256(str(home).encode()).hexdigest()[:8]}"


def worker_flags(
    home: Path, worker: Path, prefix: str, *, address: str | None = None, ledger: str | None = None
) -> list[str]:
    """Global flags of a home whose worker command is `python WORKER` on a queue of its own; `address`: a
    server the home did not start (else its own dev server), `ledger`: a PostgreSQL URL."""
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(worker))}"
    flags = ["--home", str(home), "--worker-cmd", cmd, "--task-queue", queue_of(prefix, home)]
    flags += ["--temporal-address", address] if address else []
    return flags + (["--ledger", ledger] if ledger else [])


def run_cli(
    *args: str, home: Settings | None = None, env: dict | None = None, timeout: float = 120, cwd: Path | None = None
):
    """Run `python -m checkpoint_tui ...` as a user would (from `cwd`: where a worker command runs)."""
    argv = [sys.executable, "-m", "checkpoint_tui"]
    if home is not None:
        argv += ["--home", str(home.home)]
        if home.temporal_address:
            argv += ["--temporal-address", home.temporal_address]
    full_env = {**os.environ, **(env or {})}
    if (zygote := _zygote()) is not None and (done := zygote.run([*argv[3:], *args], full_env, cwd, timeout)):
        return done
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd)


def _zygote() -> Zygote | None:
    """This process's CLI fork server (tests/cli_zygote.py), on the session's temp root."""
    global _ZYGOTE
    if _ZYGOTE is None and FORK_CLI and _ROOT is not None and len(str(_ROOT)) < 70:
        _ZYGOTE = Zygote(_ROOT)
    return _ZYGOTE


# bench/suite_cpu.py: each xdist worker says which test it runs, in a file named for it (worker id), so
# the CPU of the processes it started can be put down to that test.
_TRACE = os.environ.get("CHECKPOINT_TESTS_TRACE_DIR")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logstart(nodeid: str, location: tuple) -> None:
    if _TRACE:
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        Path(_TRACE, name).write_text(f"{os.getpid()} {nodeid}")


def alive(pid: int) -> bool:
    """The process runs (a zombie, waiting for its parent to reap it, has ended)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _leftovers(root: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(root) in cmdline and proc.pid != os.getpid():
            found.append(proc)
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _ZYGOTE is not None:
        _ZYGOTE.stop()
    if _ROOT is None:
        return
    left = [p for p in _leftovers(_ROOT) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    if not left:
        return
    lines = []
    for p in left:
        try:
            lines.append(f"{p.pid}: {' '.join(p.cmdline())[:160]}")
            p.kill()  # ours: its command line names this session's temp root
        except psutil.Error:
            pass
    sys.stderr.write("\nprocesses left running by tests (now killed):\n  " + "\n  ".join(lines) + "\n")
    session.exitstatus = 1


@contextlib.asynccontextmanager
async def supervised(settings: Settings, address: str) -> AsyncIterator[tuple[Supervisor, Client]]:
    """An in-process supervisor of these settings' pool, watching until the block ends; then its
    workers are stopped, even on failure."""
    client = await connect_client(settings, address)
    sup = Supervisor(settings, address)
    assert sup.acquire()
    try:
        sup.ensure_worker()
        async with sup.running(stop_workers=True):
            yield sup, client
    finally:
        await sup.stop(stop_workers=True)  # also when ensure_worker failed half-way


@pytest.fixture()
def utc(monkeypatch):
    """Times on screen in UTC, as the TUI snapshots were taken (one fixture for every TUI test file)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.delenv("TZ")
    time.tzset()
