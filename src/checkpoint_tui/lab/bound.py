"""`python -m checkpoint_tui.lab.bound PARENT_PID --home HOME [--temporal-address A] ARGS...`: runs
`python -m checkpoint_tui ARGS...` as its child and ends it when the process that started this one (a
Lab's, a pytest worker's) dies, however it dies: the kernel SIGTERMs this process then
(PR_SET_PDEATHSIG); it passes SIGTERM on (the command stops the workers and supervisors it started,
as on a CI timeout), waits for it (SIGKILL after a grace), then runs `stop` on the home, since no Lab
is left to close it: the dev server the home keeps between commands ends too. The Lab runs every
command through it. A parent, not a wrapper in the same process: a SIGTERM that reaches the command
before its own handler is set (starting the dev server) ends it at once, and `stop` must still run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

GRACE_S = 30.0  # as the Lab's own: a chaos ending on SIGTERM stops its processes in seconds


def stop_argv(args: list[str]) -> list[str]:
    """`stop` for the home (and server) the Lab put first in `args`."""
    home = args[:2] if args[:1] == ["--home"] else []
    address = args[2:4] if args[2:3] == ["--temporal-address"] else []
    return [*home, *address, "stop"]


def main() -> None:
    from checkpoint_tui.ops.procs import bind_to_parent

    if len(sys.argv) < 4 or not sys.argv[1].isdigit() or sys.argv[2] != "--home":
        sys.exit("usage: python -m checkpoint_tui.lab.bound PARENT_PID --home HOME ARGS...")
    parent, args = int(sys.argv[1]), sys.argv[2:]
    ended = []
    signal.signal(signal.SIGTERM, lambda *_: ended.append(True))  # before the binding: no default death
    bind_to_parent(parent, signal.SIGTERM)
    child = subprocess.Popen([sys.executable, "-m", "checkpoint_tui", *args], stdin=subprocess.DEVNULL)
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
            subprocess.run([sys.executable, "-m", "checkpoint_tui", *stop_argv(args)], stdin=subprocess.DEVNULL,
                           timeout=120, check=False)  # fmt: skip
    sys.exit(child.returncode if child.returncode is not None and child.returncode >= 0 else 1)


if __name__ == "__main__":
    main()
