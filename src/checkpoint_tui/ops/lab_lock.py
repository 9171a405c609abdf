"""One lab per home: an flock on run/lab.lock, held for the life of a command that drives the home.

An experiment (`chaos`, `--verify`, `doctor`, `compare`) kills, replaces and measures the home's
processes, so it holds the lock alone; the app and `start` only add runs and observe, so any number
of them share it. A command that cannot take the lock is refused before it starts anything, with one
line naming the holders (pid and command), read from their records under run/lab/ (one per holder,
identity-checked: a record whose process is gone or is another program names nothing).

`stop` reads the same records to end an experiment in progress (SIGTERM, after checking the pid is
still that command on this home): it would otherwise go on against a stopped lab."""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.ops.procs import ProcIdentity, open_lock, read_json, stop_process, write_json
from checkpoint_tui.settings import Settings

LOCK = "lab.lock"
HOLDERS = "lab"
EXPERIMENT_GRACE_S = 45.0  # its cleanup (chaos stops its supervisor, up to 15 s) on a loaded machine
MAX_RECORDS = 64  # records read to name the holders (run/lab/ is private, but bounded all the same)
SWEEP_LIMIT = 4096  # stale records removed per hold
MAX_NAMED = 4  # holders named in a refusal (a dozen apps on one home is possible, a dozen lines is not)


def _holders_dir(settings: Settings) -> Path:
    return settings.run_dir / HOLDERS


def _record_path(settings: Settings, pid: int) -> Path:
    return _holders_dir(settings) / f"{pid}-{secrets.token_hex(4)}.json"  # one per hold, even in one process


def _records(settings: Settings, limit: int) -> Iterator[tuple[Path, ProcIdentity | None, dict | None]]:
    """Each record under run/lab/ (at most `limit`): its path, its live holder's identity (None: gone,
    the pid another program now, or malformed), the record."""
    folder = _holders_dir(settings)
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))[:limit]
    except (FileNotFoundError, NotADirectoryError):
        return
    for name in names:
        rec = read_json(folder / name)
        ident = ProcIdentity.from_record(rec)
        yield folder / name, (ident if ident is not None and ident.matches_live() else None), rec


def holders(settings: Settings) -> list[tuple[ProcIdentity, str, bool]]:
    """The live holders: (identity, command, exclusive). Stale or forged records are skipped."""
    return [
        (ident, str(rec.get("command", "?"))[:40], bool(rec.get("exclusive")))
        for _, ident, rec in _records(settings, MAX_RECORDS)
        if ident is not None and rec is not None
    ]


def _sweep(settings: Settings) -> None:
    """Remove the records of holders that are gone (a SIGKILLed holder leaves its record): left,
    they would grow until the live ones were past the listing's bound."""
    for path, ident, _ in _records(settings, SWEEP_LIMIT):
        if ident is None:
            with contextlib.suppress(OSError):
                path.unlink()


def _refusal(settings: Settings, command: str) -> str:
    named = holders(settings)
    if not named:  # the lock is held but its record is not written yet (or was removed)
        who = "another checkpoint-tui command"
    else:
        who = ", ".join(f"{cmd} (pid {ident.pid})" for ident, cmd, _ in named[:MAX_NAMED])
        if len(named) > MAX_NAMED:
            who += f" and {len(named) - MAX_NAMED} more"
    return (
        f"{command}: the home {settings.home} is in use by {who}; wait for it to end, "
        f"`checkpoint-tui --home {settings.home} stop` it, or use another --home"
    )


@contextlib.contextmanager
def hold(settings: Settings, command: str, exclusive: bool) -> Iterator[None]:
    """Hold the home's lab lock for the block (exclusive for an experiment, shared for the app and
    `start`); refused at once (UsageError, exit 2) if a holder of the other kind has it."""
    settings.ensure_dirs()
    fd = open_lock(settings.run_dir / LOCK)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(_refusal(settings, command)) from None
    folder = _holders_dir(settings)
    record = _record_path(settings, os.getpid())
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        _sweep(settings)
        ident = ProcIdentity.of(os.getpid())
        if ident is not None:
            write_json(record, {"identity": ident.to_dict(), "command": command, "exclusive": exclusive})
        yield
    finally:
        with contextlib.suppress(OSError):
            record.unlink()
        os.close(fd)  # releases the flock


def stop_experiments(settings: Settings) -> list[str]:
    """SIGTERM (then SIGKILL after a grace) every experiment holding this home, not this process;
    what was stopped, as `stop` prints it."""
    stopped = []
    for ident, command, exclusive in holders(settings):
        if not exclusive or ident.pid == os.getpid():
            continue
        if stop_process(ident, grace=EXPERIMENT_GRACE_S):
            stopped.append(f"{command} {ident.pid}")
    return stopped
