"""What can go wrong for a user, each with its exit code. The CLI prints str(err) as one line and
exits with `err.exit_code`; nothing here carries a traceback to the terminal."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1  # a run or a check failed
    USAGE = 2  # bad flags or arguments
    UNAVAILABLE = 3  # Temporal, the ledger or a binary cannot be reached


class CheckpointError(Exception):
    """Something the user can act on; str(err) is the one-line message."""

    exit_code: Exit = Exit.FAILED


class UsageError(CheckpointError):
    """A flag, argument or environment value that cannot work; found before anything is started."""

    exit_code = Exit.USAGE


class Failed(CheckpointError):
    """A run, a check or an action did not succeed (the lab itself is reachable)."""

    exit_code = Exit.FAILED


class Unavailable(CheckpointError):
    """Temporal, the ledger, a server binary or a model server cannot be reached or started."""

    exit_code = Exit.UNAVAILABLE
