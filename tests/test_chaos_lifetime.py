"""Chaos's supervisor lives no longer than chaos (issue 25, finding 5): a SIGKILLed chaos leaves a
supervisor that the kernel stops with it, `stop` finds by its record under run/ anyway, and nothing
of the home comes back afterwards; a SIGTERMed chaos (a CI timeout) runs its own cleanup first."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import psutil

from checkpoint_tui.ops.procs import read_json
from checkpoint_tui.waiting import wait_until_sync
from conftest import queue_of, run_cli

STEPS = "60"  # long enough to be killed mid-run (pace 0.3: ~25 s)


def home_processes(home: Path) -> list[psutil.Process]:
    """Live processes whose command line names the home (workers, the dev server, supervisors)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if str(home) in " ".join(proc.info["cmdline"] or []) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def start_chaos(home: Path) -> subprocess.Popen:
    home.mkdir(parents=True)
    log = open(home / "chaos.out", "wb")  # noqa: SIM115 - closed by the caller's stop
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "checkpoint_tui",
            "--home",
            str(home),
            "chaos",
            "--seed",
            "2",
            "--steps",
            STEPS,
            "--kills",
            "3",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def supervisor_pid(home: Path) -> int | None:
    rec = read_json(home / "run" / "chaos-supervisor.json")
    return rec["identity"]["pid"] if rec else None


def stop_all(home: Path, chaos: subprocess.Popen) -> None:
    if chaos.poll() is None:
        chaos.kill()
        chaos.wait()
    run_cli("--home", str(home), "stop", timeout=60)
    for proc in home_processes(home):  # ours: started with this test's home; stop it before failing
        proc.kill()


def test_a_killed_chaos_leaves_nothing_that_stop_cannot_end(session_root):
    home = session_root / "chaos-killed"
    chaos = start_chaos(home)
    try:
        assert wait_until_sync(lambda: supervisor_pid(home) is not None, 60, every=0.1)
        sup = supervisor_pid(home)
        assert wait_until_sync(lambda: (home / "run" / "worker.pid").exists() or chaos.poll() is not None, 60)
        chaos.send_signal(signal.SIGKILL)  # our own child
        chaos.wait()
        # the kernel's parent-death signal stops the supervisor without anyone asking
        assert wait_until_sync(lambda: not psutil.pid_exists(sup) or psutil.Process(sup).status() == "zombie", 10)
        out = run_cli("--home", str(home), "stop", timeout=60)
        assert out.returncode == 0, out.stderr
        deadline = time.monotonic() + 8  # nothing of the home comes back (no supervisor respawns it)
        while time.monotonic() < deadline:
            left = home_processes(home)
            assert not left, [" ".join(p.cmdline())[:120] for p in left]
            time.sleep(0.5)
    finally:
        stop_all(home, chaos)


def test_a_sigtermed_chaos_stops_its_supervisor_and_says_so(session_root):
    home = session_root / "chaos-termed"
    chaos = start_chaos(home)
    try:
        assert wait_until_sync(lambda: supervisor_pid(home) is not None, 60, every=0.1)
        sup = supervisor_pid(home)
        chaos.send_signal(signal.SIGTERM)
        assert chaos.wait(30) == 1
        out = (home / "chaos.out").read_text()
        assert "stopped by SIGTERM" in out and "Traceback" not in out, out[-2000:]
        # what it leaves (the home's dev server, our loop's workers) is said on this way out too
        assert "\nleft running for the next chaos or the app: dev server " in out, out[-2000:]
        assert not psutil.pid_exists(sup) or psutil.Process(sup).status() == "zombie"
        assert not (home / "run" / "chaos-supervisor.json").exists()
    finally:
        stop_all(home, chaos)


@contextlib.asynccontextmanager
async def supervisor_and_standby(home: Path, address: str) -> AsyncIterator[tuple]:
    """Chaos's supervisor of `home` (on the session's dev server, a queue of its own) with a standby beside
    it: (settings, the SupervisorChild, its flags); both stopped afterwards, and the home's workers."""
    from checkpoint_tui.proof.chaos.supervisor_child import SupervisorChild
    from checkpoint_tui.settings import Settings

    settings = Settings(home=home, temporal_address=address)
    settings.ensure_dirs()
    child = SupervisorChild()
    flags = ["--temporal-address", address, "--task-queue", queue_of(home.name, home)]
    try:
        await child.spawn(settings, flags, standby=True)
        assert child.proc is not None and child.standby is not None
        yield settings, child, flags
    finally:
        await child.stop(settings)
        run_cli("--home", str(home), "--temporal-address", address, "stop", timeout=60)


async def test_stop_ends_the_standby_too(session_root, temporal_address):
    """Where the schedule kills the supervisor, chaos keeps a standby beside it (`supervise --standby`,
    waiting for the home's supervisor lock). `stop` ends it too: left running, it takes the lock as the
    supervisor goes and respawns the workers `stop` has just ended."""
    home = session_root / "chaos-standby"
    async with supervisor_and_standby(home, temporal_address) as (_, child, _):
        assert read_json(home / "run" / "chaos-supervisor.json")["standby"]
        assert "--standby" in psutil.Process(child.standby.pid).cmdline()
        out = run_cli("--home", str(home), "--temporal-address", temporal_address, "stop", timeout=60)
        assert out.returncode == 0 and "chaos supervisor" in out.stdout, out.stdout + out.stderr
        deadline = time.monotonic() + 6  # nothing of the home comes back: the standby never took over
        while time.monotonic() < deadline:
            left = home_processes(home)
            assert not left, [" ".join(p.cmdline())[:120] for p in left]
            await asyncio.sleep(0.5)


async def test_a_supervisor_that_ended_on_its_own_is_not_counted_as_killed(session_root, temporal_address):
    """The standby takes the lock however the supervisor ends. A supervisor that died before the
    schedule's kill came is no kill of chaos's (`kill` gives no hit: the engine lists the event as not
    fired), and its standby, which has taken over, is the one chaos goes on with."""
    home = session_root / "chaos-own-end"
    async with supervisor_and_standby(home, temporal_address) as (settings, child, flags):
        first, standby = child.proc, child.standby
        first.kill()  # not chaos's kill: as if it had died of something else
        await first.wait()
        assert await child.kill() is None
        await child.succeed(settings, flags, standby=False)
        assert child.proc is standby and child.standby is None and standby.returncode is None
        assert read_json(home / "run" / "chaos-supervisor.json")["identity"]["pid"] == standby.pid


def test_a_forged_supervisor_record_gets_nobody_signalled(tmp_path):
    from checkpoint_tui.ops import chaos_supervisor
    from checkpoint_tui.ops.procs import ProcIdentity
    from checkpoint_tui.settings import Settings

    settings = Settings(home=tmp_path)
    settings.ensure_dirs()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ident = ProcIdentity.of(sleeper.pid)
        assert ident is not None
        chaos_supervisor.record(settings, ident)  # a live process, but no `supervise` of this home
        assert chaos_supervisor.stop(settings) is None
        chaos_supervisor.record(settings, None, ident)  # nor named as the standby
        assert chaos_supervisor.stop(settings) is None
        assert sleeper.poll() is None, "a forged record got another process signalled"
    finally:
        sleeper.kill()
        sleeper.wait()
    assert os.path.exists(tmp_path / "run") and not (tmp_path / "run" / "chaos-supervisor.json").exists()


def test_stop_ends_a_worker_no_record_names_and_only_one_started_for_the_home(tmp_path):
    """A supervisor that dies between spawning a worker and saving its record (chaos's dies with chaos,
    at any moment) leaves a worker nothing names: seen once, a warm spare still waiting after `stop`.
    `stop` ends a process running this home's worker command that was started with this home's
    CHECKPOINT_HOME; one that only looks like it (no such environment) is left alone."""
    home = tmp_path / "h"
    (home / "run").mkdir(parents=True)
    cmd = [
        sys.executable,
        "-c",
        "import time; time.sleep(120)",
        "-m",
        "checkpoint_tui.worker",
        "--home",
        str(home),
        "--standby",
    ]
    bare_env = {k: v for k, v in os.environ.items() if k != "CHECKPOINT_HOME"}
    orphan = subprocess.Popen(cmd, env={**bare_env, "CHECKPOINT_HOME": str(home)}, start_new_session=True)
    lookalike = subprocess.Popen(cmd, env=bare_env, start_new_session=True)
    try:
        assert wait_until_sync(lambda: all(psutil.Process(p.pid).cmdline() == cmd for p in (orphan, lookalike)), 10)
        out = run_cli("--home", str(home), "stop", timeout=60)
        assert out.returncode == 0 and f"unrecorded worker {orphan.pid}" in out.stdout, out.stdout + out.stderr
        assert orphan.wait(10) is not None  # ended (SIGTERM), and reaped here
        assert lookalike.poll() is None and str(lookalike.pid) not in out.stdout
    finally:
        for proc in (orphan, lookalike):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
