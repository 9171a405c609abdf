"""A child's identity is taken once it has exec'd (procs.identity_after_exec), never right after
Popen: Popen returns as soon as exec has begun, and for a moment /proc/PID/cmdline is still empty.
An identity taken in that moment never matches the process again, so every identity-checked signal
to it is refused: the cause of the loaded-machine flake in test_scale_out (issue 25, finding 12),
where kill_all's SIGKILL was refused and proc.wait(10) timed out."""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import sys
import time

from checkpoint_tui.ops.procs import ProcIdentity, identity_after_exec, send_signal_if_ours

SPAWNS = 150


def _burn(until: float) -> None:
    while time.monotonic() < until:
        pass


def test_a_child_identity_taken_after_exec_is_always_signallable():
    """Under two CPU burners (a loaded machine): each identity from identity_after_exec matches and its
    SIGKILL is sent; how often an identity taken at once would have been refused is printed."""
    argv = [sys.executable, "-c", "import time; time.sleep(30)", "identity-test"]
    ctx = multiprocessing.get_context("spawn")
    burners = [ctx.Process(target=_burn, args=(time.monotonic() + 120,), daemon=True) for _ in range(2)]
    for b in burners:
        b.start()
    missed_at_once = 0
    try:
        for _ in range(SPAWNS):
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                at_once = ProcIdentity.of(proc.pid)
                missed_at_once += at_once is None or list(at_once.cmdline) != argv
                ident = identity_after_exec(proc.pid, argv)
                assert ident is not None and ident.matches_live()
                assert send_signal_if_ours(ident, signal.SIGKILL)
                assert proc.wait(5) == -signal.SIGKILL
            finally:
                proc.kill()  # our own child, unreaped until here: a no-op once it is gone
                proc.wait()
    finally:
        for b in burners:
            b.terminate()
            b.join(5)
    print(f"\nidentity taken right after Popen missed the command {missed_at_once}/{SPAWNS} times; after exec 0")


def test_a_wall_clock_step_does_not_make_our_process_a_stranger_and_a_reused_pid_stays_one():
    """psutil's create_time follows the wall clock's boot time: after a clock step a recorded process
    read `stop` as a stranger's. The kernel's start ticks identify it whatever the clock did; a
    record whose ticks differ (a reused pid) is refused, and an old record without ticks is compared
    by create_time as before."""
    from dataclasses import replace

    from checkpoint_tui.ops.procs import start_ticks

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ident = ProcIdentity.from_dict(ProcIdentity.of(proc.pid).to_dict())  # as a record holds it
        assert ident.start_ticks == start_ticks(proc.pid) is not None
        stepped = replace(ident, create_time=ident.create_time - 2.0)  # recorded before a 2 s clock step
        assert stepped.exists() and stepped.matches_live()
        reused = replace(ident, start_ticks=ident.start_ticks - 1)
        assert not reused.exists() and not reused.matches_live() and not send_signal_if_ours(reused, signal.SIGKILL)
        old = replace(ident, start_ticks=None)
        assert old.exists() and not replace(old, create_time=old.create_time - 2.0).exists()
        assert ProcIdentity.from_dict({**ident.to_dict(), "start_ticks": "12"}).start_ticks is None  # hostile
        assert ProcIdentity.from_dict({**ident.to_dict(), "start_ticks": True}).start_ticks is None
        assert proc.poll() is None  # nothing above signalled it
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert not ident.exists()
