"""Why a child of ours died during start-up, in one line: how it ended (exit code or signal) and the
last meaningful line it wrote to its log. "See the log" alone sends a user to a file whose last line
may say nothing about a SIGILL; the signal's name does."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

TAIL_BYTES = 64 * 1024  # a log can be large; its last line is in its last few KB
MAX_LINE_CHARS = 200
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")  # colours, titles
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def log_size(path: Path) -> int:
    """Where the next child's output starts in an append-mode log (0 if there is none yet)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def signal_label(signum: int) -> str:
    """SIGILL (illegal instruction), SIGSEGV (segmentation fault), ..."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
    meaning = signal.strsignal(signum)
    return f"{name} ({meaning.lower()})" if meaning else name


def describe_exit(returncode: int | None) -> str:
    """How a process ended, from Popen's returncode (negative: killed by that signal)."""
    if returncode is None:
        return "ended (exit status unknown)"
    if returncode < 0:
        return f"was killed by {signal_label(-returncode)}"
    if 128 < returncode <= 128 + 64 and _is_signal(returncode - 128):
        # a shell between us and the program reports a signal death as 128 + the signal's number
        return f"exited with code {returncode} (128 + {signal_label(returncode - 128)})"
    return f"exited with code {returncode}"


def _is_signal(signum: int) -> bool:
    try:
        signal.Signals(signum)
    except ValueError:
        return False
    return True


def last_log_line(path: Path, start: int = 0) -> str | None:
    """The last non-blank line written to `path` at or after byte `start`, without control characters
    or terminal escapes, cut to MAX_LINE_CHARS. Reads at most the last TAIL_BYTES."""
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, 2)
            fh.seek(max(start, end - TAIL_BYTES, 0))
            tail = fh.read()
    except OSError:
        return None
    for raw in reversed(tail.decode("utf-8", errors="replace").splitlines()):
        line = _CONTROL.sub("", _ANSI.sub("", raw)).strip()
        if any(ch.isalnum() for ch in line):  # skip blank lines and bare separators
            return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
    return None


def returncode_of(proc: subprocess.Popen, timeout: float = 2.0) -> int | None:
    """The exit status of our child whose start failed (it may take a moment to be reported). One
    still running after `timeout` (it never showed the command we started) is killed, not left
    behind, and None is returned: that status would say nothing about why it failed."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()  # our own unreaped child: its pid cannot have been reused
        proc.wait()
        return None


def startup_death(
    what: str, returncode: int | None, log: Path, log_start: int = 0, when: str = "during start-up"
) -> str:
    """One line: `<what> <how it ended> <when>; last log line: '...' (<log>)`."""
    line = last_log_line(log, log_start)
    said = f"last log line: {line!r}" if line else "it wrote nothing to its log"
    return f"{what} {describe_exit(returncode)} {when}; {said} ({log})"
