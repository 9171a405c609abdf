"""The artifact files the effects write, and the one place their format is read back: the step file
`artifacts/<run>/step-NNN.md` and the outbox `artifacts/<run>/outbox.log` (one line per email,
`<effect id>\\t<payload>`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

OUTBOX_SEPARATOR = "\t"


def step_file(artifacts_dir: Path, run_id: str, step: int) -> Path:
    return artifacts_dir / run_id / f"step-{step:03d}.md"


def outbox_path(artifacts_dir: Path, run_id: str) -> Path:
    return artifacts_dir / run_id / "outbox.log"


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


# Process-wide caches keyed by path and the file's (size, mtime): the TUI polls these twice a second
# and a finished run's files never change. They hold derived counts, never evidence of their own.
_outbox_counts: dict[Path, tuple[tuple[int, int], tuple[int, int]]] = {}
_dir_counts: dict[Path, tuple[int, int]] = {}


def outbox_counts(path: Path) -> tuple[int, int]:
    """(lines, lines beyond the first per effect id). Re-read only when the file changed."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return 0, 0
    key = (st.st_size, st.st_mtime_ns)
    cached = _outbox_counts.get(path)
    if cached and cached[0] == key:
        return cached[1]
    ids = outbox_ids(path)
    lines = sum(ids.values())
    counts = (lines, lines - len(ids))
    _outbox_counts[path] = (key, counts)
    return counts


def count_step_files(run_dir: Path) -> int:
    """Count step files; re-listed only when the directory changed (its mtime moves on every add/replace)."""
    try:
        mtime = run_dir.stat().st_mtime_ns
    except FileNotFoundError:
        return 0
    cached = _dir_counts.get(run_dir)
    if cached and cached[0] == mtime:
        return cached[1]
    count = sum(1 for p in run_dir.iterdir() if p.name.startswith("step-") and p.name.endswith(".md"))
    _dir_counts[run_dir] = (mtime, count)
    return count
