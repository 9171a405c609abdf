"""`python -m checkpoint_tui.lab.bound PARENT_PID --home HOME [--temporal-address A] ARGS...`: the CLI
with the same arguments, SIGTERMed by the kernel when the process that started it (a Lab's, a
pytest worker's) dies, however it dies. SIGTERM ends a command as a CI timeout would (it stops the
workers and supervisors it started); the dev server a home keeps for the next command is then
stopped too (`stop` on the home), since no Lab is left to close it. The Lab runs every command
through it."""

from __future__ import annotations

import os
import signal
import sys


def stop_argv(args: list[str]) -> list[str]:
    """`stop` for the home (and server) the Lab put first in `args`."""
    home = args[:2] if args[:1] == ["--home"] else []
    address = args[2:4] if args[2:3] == ["--temporal-address"] else []
    return [*home, *address, "stop"]


def main() -> None:
    from checkpoint_tui.cli import run
    from checkpoint_tui.ops.procs import bind_to_parent

    if len(sys.argv) < 4 or not sys.argv[1].isdigit() or sys.argv[2] != "--home":
        sys.exit("usage: python -m checkpoint_tui.lab.bound PARENT_PID --home HOME ARGS...")
    parent, args = int(sys.argv[1]), sys.argv[2:]
    bind_to_parent(parent, signal.SIGTERM)
    code = run(args)
    if os.getppid() != parent:  # orphaned: the caller died mid-command, and nobody will close its Lab
        run(stop_argv(args))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))  # as cli.main: no interpreter finalisation (the SDK's native threads)


if __name__ == "__main__":
    main()
