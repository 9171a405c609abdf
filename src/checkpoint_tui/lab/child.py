"""The CLI command a Lab runs, as a child process: its log file, its output's tail, its end (SIGTERM,
then SIGKILL of its group) and the stop of the home it started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TERM_GRACE_S = 40.0  # after SIGTERM a command stops what it started (lab/bound.py gives it 30 s, then SIGKILL)
STOP_TIMEOUT_S = 120.0
MAX_OUTPUT = 64 * 1024  # of the command's printed text kept in a result (all of it is in its log file)


def stop_home(argv: list[str], cwd: Path, env: dict[str, str], started: list[bool]) -> None:
    if not started[0]:
        return
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        subprocess.run(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=STOP_TIMEOUT_S,
            check=False,
        )


def end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command (it stops what it started, as on a CI timeout); SIGKILL its group if it is
    still there after TERM_GRACE_S, or if a second interrupt cuts the wait short."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=TERM_GRACE_S)
    finally:
        if proc.poll() is None:  # not reaped: the group (its own session) is still its
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextlib.contextmanager
def new_file(path: Path) -> Iterator[BinaryIO]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as f:
        yield f


def tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.fstat(f.fileno()).st_size - MAX_OUTPUT))
        return f.read(MAX_OUTPUT).decode("utf-8", "replace")


def one_line(output: str, code: int) -> str:
    lines = [line for line in output.splitlines() if line.startswith("checkpoint-tui:")] or output.splitlines()
    return (lines[-1] if lines else f"exit {code}")[:1000]
