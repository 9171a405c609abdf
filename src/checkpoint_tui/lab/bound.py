"""`python -m checkpoint_tui.lab.bound PARENT_PID [--started] --home HOME [--temporal-address A] ARGS...`:
runs `python -m checkpoint_tui ARGS...` as its child and ends it when the process that started this
one (a Lab's, a pytest worker's) dies, however it dies: the kernel SIGTERMs this process then
(PR_SET_PDEATHSIG); it passes SIGTERM on (the command stops the workers and supervisors it started,
as on a CI timeout), waits for it (SIGKILL after a grace), then runs `stop` on the home, since no Lab
is left to close it: the dev server the home keeps between commands ends too. `--started`: an
earlier command of the Lab ran there, so a caller found dead before this one starts still means a
`stop`. The child is bound to this process in turn: if this one is killed alone, the command ends.

A parent, not a wrapper in the same process: a SIGTERM that reaches the command before its own
handler is set (while the dev server starts) ends it at once, and `stop` must still run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

GRACE_S = 30.0  # a chaos ending on SIGTERM stops its processes in seconds; the Lab waits longer than this
STOP_TIMEOUT_S = 120.0


def stop_argv(args: list[str]) -> list[str]:
    """`stop` for the home (and server) the Lab put first in `args`."""
    home = args[:2] if args[:1] == ["--home"] else []
    address = args[2:4] if args[2:3] == ["--temporal-address"] else []
    return [*home, *address, "stop"]


def stop_home(args: list[str]) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        subprocess.run(
            [sys.executable, "-P", "-m", "checkpoint_tui", *stop_argv(args)],
            stdin=subprocess.DEVNULL,
            timeout=STOP_TIMEOUT_S,
            check=False,
        )


def run_bound(parent: int, started: bool, args: list[str]) -> int:
    from checkpoint_tui.ops.procs import die_with_parent

    ended: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: ended.append(True))  # before the binding: no default death
    die_with_parent(signal.SIGTERM)
    if os.getppid() != parent or ended:  # the caller died (or the Lab ended this) before the binding took
        if started and os.getppid() != parent:
            stop_home(args)
        return 1
    child = subprocess.Popen(
        [sys.executable, "-P", "-m", "checkpoint_tui", *args],
        stdin=subprocess.DEVNULL,
        preexec_fn=lambda: die_with_parent(signal.SIGTERM),
    )  # safe: no other thread here
    while child.poll() is None and not ended:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=0.1)
    if ended:  # the caller died (or the Lab ends the command): end it, then the home
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        if os.getppid() != parent:  # orphaned: nobody will close its Lab
            stop_home(args)
    code = child.returncode
    return code if code >= 0 else 128 - code  # a signal's death is not a verdict (the Lab raises on it)


def main() -> None:
    argv = sys.argv[1:]
    started = len(argv) > 1 and argv[1] == "--started"
    args = argv[2:] if started else argv[1:]
    if not argv or not argv[0].isdigit() or args[:1] != ["--home"] or len(args) < 2:
        sys.exit("usage: python -m checkpoint_tui.lab.bound PARENT_PID [--started] --home HOME ARGS...")
    sys.exit(run_bound(int(argv[0]), started, args))


if __name__ == "__main__":
    main()
