"""The artifact files the effects write, and the one place their format is read back: the step file
`artifacts/<run>/step-NNN.md` and the outbox `artifacts/<run>/outbox.log` (one line per email,
`<effect id>\\t<payload>`)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
from collections import Counter
from pathlib import Path

OUTBOX_SEPARATOR = "\t"
NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC  # a symlink planted where we write is refused, not followed


class ArtifactPathError(ValueError):
    """A run id or a folder that would put an artifact outside the artifacts root."""


def run_folder(artifacts_dir: Path, run_id: str) -> Path:
    """`artifacts/<run_id>`, refused if the id could name anything but one folder directly under the
    root (absolute, `..`, a separator, NUL)."""
    if not run_id or run_id in (".", "..") or "/" in run_id or "\x00" in run_id or "\\" in run_id:
        raise ArtifactPathError(f"run id {run_id[:80]!r} cannot name an artifacts folder")
    return artifacts_dir / run_id


def step_file(artifacts_dir: Path, run_id: str, step: int) -> Path:
    return run_folder(artifacts_dir, run_id) / f"step-{step:03d}.md"


def outbox_path(artifacts_dir: Path, run_id: str) -> Path:
    return run_folder(artifacts_dir, run_id) / "outbox.log"


def ensure_run_folder(path: Path) -> None:
    """Create the file's run folder; refuse one that is a symlink or resolves outside the root."""
    folder = path.parent
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink() or folder.resolve().parent != folder.parent.resolve():
        raise ArtifactPathError(f"{folder} is a link out of the artifacts root; refusing to write there")


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    """Write a temp file (O_EXCL|O_NOFOLLOW), fsync it, rename it over `path`, fsync the folder: after
    a power loss the file holds these bytes or the previous ones, never a torn mix, and the ledger's
    stamp (written after this returns) never outlives the file."""
    ensure_run_folder(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{secrets.token_hex(4)}")  # unique across hosts
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def same_bytes(path: Path, data: bytes) -> bool:
    """Whether the regular file at `path` (not followed if a link) holds exactly `data`; read no more
    than one byte past its length."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(len(data) + 1) == data
    finally:
        os.close(fd)


def append_once(path: Path, prefix: bytes, line: bytes, check: bool, durable: bool = True) -> bool:
    """Append `line` under an exclusive lock; with `check`, only if no line starts with `prefix`.
    True if it appended. One write(2) with O_APPEND: no torn interleaving between writers."""
    ensure_run_folder(path)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | NOFOLLOW, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if check:
            with os.fdopen(os.dup(fd), "rb") as fh:
                if any(existing.startswith(prefix) for existing in fh):
                    return False
        os.write(fd, line)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock
    if durable and created:
        fsync_dir(path.parent)
    return True


def outbox_line(effect_id: str, payload: str) -> str:
    return f"{effect_id}{OUTBOX_SEPARATOR}{payload}\n"


def outbox_line_id(line: str) -> str:
    """The effect id an outbox line names."""
    return line.split(OUTBOX_SEPARATOR, 1)[0]


def outbox_ids(path: Path) -> Counter[str]:
    """How many lines name each effect id (more than one: the email went out twice)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return Counter()
    return Counter(outbox_line_id(line) for line in text.splitlines() if line)


def email_sent(path: Path, effect_id: str) -> bool:
    return outbox_ids(path)[effect_id] > 0


# Process-wide caches for the app's refreshes (twice a second): derived counts kept per file or folder,
# brought up to date from what was appended since. Full snapshots (status, verify, chaos, the audit)
# pass exact=True and count from scratch, so no proof rests on a cache.
_outbox_counts: dict[Path, tuple[tuple[int, int], int, Counter[str]]] = {}  # (inode, dev), offset, ids
_dir_counts: dict[Path, tuple[int, int, int]] = {}  # folder -> (mtime, count, next step to look for)


def outbox_counts(path: Path, exact: bool = False) -> tuple[int, int]:
    """(lines, lines beyond the first per effect id). The outbox only grows: read only what was
    appended since the last call (whole again if the file was replaced or shrank)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return 0, 0
    ident = (st.st_ino, st.st_dev)
    cached = _outbox_counts.get(path)
    if exact or cached is None or cached[0] != ident or st.st_size < cached[1]:
        cached = (ident, 0, Counter())
    _, offset, ids = cached
    if st.st_size > offset:
        with open(path, "rb") as fh:
            fh.seek(offset)
            chunk = fh.read(st.st_size - offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written is counted next time
        ids.update(outbox_line_id(line) for line in complete.decode("utf-8", "replace").splitlines() if line)
        offset += len(complete)
    _outbox_counts[path] = (ident, offset, ids)
    lines = sum(ids.values())
    return lines, lines - len(ids)


def count_step_files(run_dir: Path, exact: bool = False) -> int:
    """Count step files. Exact: list the folder. Otherwise, when the folder changed, look only for the
    step files after the last one counted (steps are written in order)."""
    try:
        mtime = run_dir.stat().st_mtime_ns
    except FileNotFoundError:
        return 0
    cached = _dir_counts.get(run_dir)
    if cached and cached[0] == mtime and not exact:
        return cached[1]
    if exact or cached is None:
        steps = [p.name for p in run_dir.iterdir() if p.name.startswith("step-") and p.name.endswith(".md")]
        count, nxt = len(steps), max((int(n[5:-3]) for n in steps if n[5:-3].isdigit()), default=0) + 1
    else:
        count, nxt = cached[1], cached[2]
        while (run_dir / f"step-{nxt:03d}.md").exists():
            count, nxt = count + 1, nxt + 1
    _dir_counts[run_dir] = (mtime, count, nxt)
    return count
