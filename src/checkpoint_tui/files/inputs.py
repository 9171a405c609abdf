"""Reading a file a user names, one way: opened without blocking (a FIFO must not hang us), refused
unless it is a regular file (a FIFO, /dev/zero, a directory), its size checked before a byte is read,
the read itself bounded (a file may grow meanwhile), and JSON parsed within a depth bound. Any of it
going wrong is one UsageError (exit 2) naming the file."""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from typing import Any

from checkpoint_tui.errors import UsageError

# Nesting of any JSON the lab reads: its own files nest under 10 levels; past this a value is hostile
# (the C parser's own guard is the interpreter's recursion limit, ~1000, which later code then hits).
MAX_DEPTH = 64
# Values in any JSON file the lab reads, counted before parsing as the file's `{`, `[`, `,` and `:` (an
# upper bound: one in a string counts too). Parsed, each can cost ~90 bytes (measured on lists of short
# strings, of empty and of one-key objects): 4 MiB of `{},` took the command to 265 MB. This keeps a
# file's values under ~45 MB.
MAX_ITEMS = 500_000
# With MAX_ITEMS, the caps keep a hostile file's parse (its bytes, its text at up to 4 bytes a
# character, its strings) under 200 MB for the whole command (tests/test_bounded_files.py).
SCHEDULE_LIMIT = 4 * 1024 * 1024  # a schedule's 10,000 events at ~130 bytes each, three times over
HISTORY_LIMIT = 8 * 1024 * 1024  # an execution of our workflow is 0.1-1 MB: it continues as new every 25 steps
_CHUNK = 1024 * 1024
_OPEN = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def read_input(path: str | os.PathLike[str], what: str, limit: int, *, follow: bool = True) -> bytes:
    """The bytes of the regular file `path` (at most `limit` of them). `follow=False` refuses a symbolic
    link as the last component: for names the lab found itself in a directory, not ones a user typed."""
    flags = _OPEN if follow else _OPEN | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as err:
        if err.errno == errno.ELOOP and not follow:
            raise UsageError(f"{what} {path} is a symbolic link; refusing to follow it") from None
        raise UsageError(f"cannot read {what} {path}: {err.strerror or err}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what} {path} is {_kind(st.st_mode)}, not a regular file; refusing to read it")
        if st.st_size > limit:
            raise UsageError(f"{what} {path} is {st.st_size} bytes, over the limit of {limit}")
        return _read_bounded(fd, path, what, limit)
    finally:
        os.close(fd)


def _read_bounded(fd: int, path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
        except OSError as err:
            raise UsageError(f"cannot read {what} {path}: {err.strerror or err}") from None
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:  # it grew since fstat
            raise UsageError(f"{what} {path} grew past the limit of {limit} bytes while being read")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_json_file(path: str | os.PathLike[str], what: str, limit: int, *, follow: bool = True) -> Any:
    """The JSON value in `path`, read by `read_input` and nested at most MAX_DEPTH deep."""
    data = read_input(path, what, limit, follow=follow)
    if (items := sum(data.count(c) for c in b"{[,:")) > MAX_ITEMS:
        raise UsageError(f"{what} {path} holds over {MAX_ITEMS} JSON values ({items} of , : [ {{): refusing it")
    try:
        value = json.loads(data)
    except RecursionError:  # the C parser's own guard; no traceback, one line
        raise UsageError(f"{what} {path} nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise UsageError(f"{what} {path} is not JSON: {str(err).splitlines()[0][:160]}") from None
    if nested_deeper(value, MAX_DEPTH):
        raise UsageError(f"{what} {path} nests deeper than {MAX_DEPTH} levels")
    return value


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether lists and dicts in `value` nest more than `limit` deep (a scalar is 0, `[]` is 1). An
    explicit stack of the open containers' iterators: walking it must not recurse either, and its
    memory follows the depth, not the width (a list of a million objects is one entry)."""
    if not isinstance(value, dict | list):
        return False
    if limit < 1:
        return True
    stack = [iter(_children(value))]
    while stack:
        child = next(stack[-1], _DONE)
        if child is _DONE:
            stack.pop()
        elif isinstance(child, dict | list):
            if len(stack) >= limit:
                return True
            stack.append(iter(_children(child)))
    return False


_DONE = object()


def _children(node: dict | list):
    return node.values() if isinstance(node, dict) else node


def check_json_value(value: Any, what: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse (UsageError naming `what`) a value nested over `max_depth`, holding a NaN or an infinity,
    or one temporalio's default payload converter cannot encode: checked before anything is started,
    so a bad value never gets as far as Temporal."""
    if nested_deeper(value, max_depth):
        raise UsageError(f"{what} nests deeper than {max_depth} levels")
    if _non_finite(value):
        raise UsageError(f"{what} holds NaN or Infinity, which is not JSON")
    from temporalio.converter import default  # the SDK is imported by every caller that starts a workflow

    try:
        default().payload_converter.to_payloads([value])
    except (RecursionError, TypeError, ValueError, OverflowError) as err:
        raise UsageError(f"{what} cannot be encoded for Temporal: {str(err).splitlines()[0][:160]}") from None


def _non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return False
