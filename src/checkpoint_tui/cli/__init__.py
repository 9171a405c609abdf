"""Command line: the TUI by default; the subcommands and `--verify` run headless and never import
Textual. `main` turns every CheckpointError into one line on stderr and its exit code."""

from __future__ import annotations

import os
import sys

from checkpoint_tui.errors import CheckpointError, Exit


def main(argv: list[str] | None = None) -> int:
    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: the Temporal SDK's native threads can abort it (exit 134) after
    # an otherwise clean run (measured ~40% of short scripts; see notes/temporal-facts.md).
    os._exit(int(code))


def run(argv: list[str] | None = None) -> int:
    """Parse, build the settings, run the chosen command; returns the exit code."""
    from checkpoint_tui.cli.parser import build_parser

    args = build_parser().parse_args(argv)  # a bad flag exits 2 here, before anything starts
    try:
        from checkpoint_tui.cli.commands import dispatch

        return int(dispatch(args))
    except CheckpointError as err:
        print(f"checkpoint-tui: {err}", file=sys.stderr)
        return int(err.exit_code)
    except KeyboardInterrupt:
        return Exit.FAILED
