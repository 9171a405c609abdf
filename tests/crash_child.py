"""Run as a child process by test_crash_window: claim an effect, then SIGKILL ourselves either right
after the claim commits (before the write) or right after the write (before the stamp)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from checkpoint_tui.ledger.effects import EffectSpec, apply_effect_once, physical_for
from checkpoint_tui.ledger.store import connect


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(db: str, artifacts: str, kind: str, mode: str, payload: str) -> None:
    conn = connect(db)  # a SQLite path or a postgresql:// URL
    spec = EffectSpec("run-c", 7, kind, payload, 1, os.getpid(), "run-c")
    write = physical_for(kind, conn, Path(artifacts))

    def write_then_die(s: EffectSpec, recovering: bool) -> None:
        write(s, recovering)
        die()

    if mode == "after_claim":
        apply_effect_once(conn, spec, write, after_claim=die)
    else:
        apply_effect_once(conn, spec, write_then_die)
    raise SystemExit("not killed")  # unreachable if the kill happened


if __name__ == "__main__":
    main(*sys.argv[1:])
