"""The probe log: every physical write call, counted outside the ledger (the independent check).

One JSON line per call, appended BEFORE the write is called (so a kill mid-write still counts the
attempt): `{"key", "kind", "workflow_id", "run_id", "activity_id", "attempt", "pid", "t"}` (`t`: when
the call began). Each record is one `write(2)` on an O_APPEND descriptor and under PROBE_LINE_MAX
bytes, so records of concurrent writers (threads, processes, hosts on one local file system) never
interleave; it is fsynced before the write runs. A record starts with a newline as well as ending
with one: a record torn by a short write (a full disk) is then a line of its own, never the start of
the next record's line (the reader skips it, and the empty lines between records).

A write that returned instead of running (a plain callable that made a coroutine or a generator,
closed unrun) is retracted by a record of the same key, pid and attempt with `"unrun": true`: the
reader drops it and the call it retracts, so the file counts only calls that could have written.

The ledger's claim rows say what the protocol decided; this file says how often the user's write was
actually entered, which is what a duplicate would show up in.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from checkpoint_tui.errors import Failed, UsageError
from checkpoint_tui.files import read_input

PROBE_LINE_MAX = 4000  # bytes, newlines included: below the 4 KiB page an append is written in
PROBE_READ_LIMIT = 64 * 1024 * 1024  # bytes read_probe_log reads at most
# Bytes of JSON text (quotes included) each informative field may take; only the key counts. The key
# takes at most 2 + 4 * (4 + KEY_LIMIT) = 2066 bytes (a printable character is at most 4 bytes of
# UTF-8, or 2 as the escapes \" and \\), the kind 66, names and numbers ~120: ~3650 with these.
_FIELD_BUDGETS = {"workflow_id": 800, "run_id": 300, "activity_id": 300}
OPEN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


class ProbeLogError(Failed):
    """The probe log cannot be read within its bound."""


@dataclass(frozen=True)
class ProbeRecord:
    key: str
    kind: str
    workflow_id: str
    run_id: str
    activity_id: str
    attempt: int
    pid: int
    t: float
    unrun: bool = False  # retracts the call before it of this key, pid and attempt: it wrote nothing


def probe_line(record: ProbeRecord) -> bytes:
    """The record as one line, between two newlines. The key is kept whole (the library bounds it); the
    fields that only inform are cut, by their encoded bytes, so the line stays under PROBE_LINE_MAX. A
    lone surrogate becomes a JSON escape. A line that would still be over (a key the library did not
    bound) raises ValueError: the library builds the line before it claims anything."""
    fields = asdict(record)
    if not fields["unrun"]:
        del fields["unrun"]  # only a retraction says it
    for name, budget in _FIELD_BUDGETS.items():
        fields[name] = _cut(fields[name], budget)
    text = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    line = f"\n{text}\n".encode("utf-8", "backslashreplace")
    if len(line) > PROBE_LINE_MAX:
        raise ValueError(f"probe line of {len(line)} bytes is over {PROBE_LINE_MAX}")
    return line


def _json_size(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8", "backslashreplace"))


def _cut(text: str, budget: int) -> str:
    """The longest prefix of `text` whose JSON string (quotes included) is at most `budget` bytes."""
    text = text[:budget]  # every character takes at least one byte
    size = 2
    for i, char in enumerate(text):
        size += _json_size(char) - 2
        if size > budget:
            return text[:i]
    return text


def append_probe(path: Path, line: bytes) -> None:
    """Append one record (`probe_line`) with one write(2), then fsync: the count survives a SIGKILL
    that comes next."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, OPEN_FLAGS, 0o600)
    try:
        written = os.write(fd, line)
        if written != len(line):  # a full disk; the caller's attempt fails before its write (retried)
            raise OSError(f"short write to the probe log {path}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def read_probe_records(path: str | os.PathLike[str], limit: int = PROBE_READ_LIMIT) -> list[ProbeRecord]:
    """Every complete record, oldest first. A last line without its newline was torn (a writer killed
    inside its append, or still appending) and is left out, as is a line that is not a record (a
    record torn by a short write is a line of its own) and an empty line; a missing file has none. A
    file over `limit` bytes is refused, not read in part (a partial count would under-report
    duplicates)."""
    try:  # the lab reads what a user's worker wrote: a FIFO, a device or a link there is refused, not read
        data = read_input(path, "the probe log", limit, follow=False)
    except UsageError as err:
        if not os.path.lexists(path):
            return []
        raise ProbeLogError(f"{err}; move it aside to start a new one") from None
    complete = data[: data.rfind(b"\n") + 1]
    records: list[ProbeRecord] = []
    for raw in complete.splitlines():
        record = _record(raw) if raw.strip() else None
        if record is None:
            continue
        if not record.unrun:
            records.append(record)
            continue
        for i in range(len(records) - 1, -1, -1):  # the call it retracts: the latest of its key, pid, attempt
            r = records[i]
            if (r.key, r.pid, r.attempt) == (record.key, record.pid, record.attempt):
                del records[i]
                break
    return records


def read_probe_log(path: str | os.PathLike[str], limit: int = PROBE_READ_LIMIT) -> dict[str, int]:
    """How many physical write calls each key had (more than one: the write was entered again)."""
    return dict(Counter(r.key for r in read_probe_records(path, limit)))


def _record(raw: bytes) -> ProbeRecord | None:
    """A record from one line; None for a torn or foreign line. Only the key must be there (it is what
    is counted): fields a later format adds are ignored, odd values of the others read as empty."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # torn, not JSON, or nested too deep to be ours
        return None
    if not isinstance(value, dict) or not isinstance(value.get("key"), str):
        return None
    text = {name: str(value.get(name) or "") for name in ("kind", "workflow_id", "run_id", "activity_id")}
    return ProbeRecord(
        key=value["key"],
        attempt=int(_number(value.get("attempt"))),
        pid=int(_number(value.get("pid"))),
        t=_number(value.get("t")),
        unrun=value.get("unrun") is True,
        **text,
    )


def _number(value: object) -> float:
    """A finite JSON number, else 0 (NaN and infinities parse, but int() of them raises)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return 0.0
    try:
        return float(value)
    except OverflowError:  # an int too large for a float
        return 0.0
