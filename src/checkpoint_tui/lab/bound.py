"""`python -m checkpoint_tui.lab.bound PARENT_PID ARGS...`: the CLI with ARGS, SIGTERMed by the kernel
when the process that started it (a Lab's, a pytest worker's) dies however it dies: a SIGKILLed or
crashed test run leaves no chaos, worker or dev server behind (SIGTERM ends a command as a CI
timeout would: it stops what it started). The Lab runs every command through it."""

from __future__ import annotations

import signal
import sys


def main() -> None:
    from checkpoint_tui.cli import main as cli_main
    from checkpoint_tui.ops.procs import bind_to_parent

    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        sys.exit("usage: python -m checkpoint_tui.lab.bound PARENT_PID ARGS...")
    bind_to_parent(int(sys.argv[1]), signal.SIGTERM)
    cli_main(sys.argv[2:])


if __name__ == "__main__":
    main()
