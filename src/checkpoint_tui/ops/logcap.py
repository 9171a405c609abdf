"""Capped, rotated logs for the children whose output goes to run/ (workers, worker commands, the dev
server): a child writes into a pipe, and a small process of its own appends what comes through to
run/NAME, renaming it to NAME.1 (replacing the previous one) when the next write would take it past
LOG_CAP: at most 2 x LOG_CAP on disk per log. It exits when the last writer has closed the pipe (the
child and whatever it forked). The writer is ops/log_writer.py run as a script (`python -I -S`: os
and sys only), with run/ handed over as a descriptor: its command line names no home, and a link
planted at the log's name is refused, not followed."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.ops import log_writer

LOG_CAP = 10 * 1024 * 1024  # bytes per file; one rotated file is kept beside it


@dataclass
class LogPipe:
    """The write end to hand a child as stdout and stderr (close it once the child is started)."""

    fd: int
    writer: subprocess.Popen

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def drained(self, timeout: float = 2.0) -> bool:
        """Wait until everything written has reached the file (the writer exits at EOF): before a dead
        child's last log line is read. False if a member of its group still holds the pipe."""
        try:
            self.writer.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True


_WRITERS: list[subprocess.Popen] = []  # reaped as later ones start: they exit on their own


def open_log(run_dir: Path, name: str, cap: int | None = None) -> LogPipe:
    """Start a writer appending to run_dir/name within `cap` (default LOG_CAP); returns the pipe."""
    cap = cap or LOG_CAP
    _WRITERS[:] = [w for w in _WRITERS if w.poll() is None]
    read_end, write_end = os.pipe()
    dir_fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        writer = subprocess.Popen(
            [sys.executable, "-I", "-S", log_writer.__file__, str(dir_fd), name, str(cap)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(dir_fd,),
            start_new_session=True,
            cwd="/",
            env={},
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
        os.close(dir_fd)
    _WRITERS.append(writer)
    return LogPipe(write_end, writer)
