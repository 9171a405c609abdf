"""The supervisor process `chaos` runs beside itself (`supervise --bound-to PID`): recorded under run/
with its identity, so `stop` can find it; bound to chaos (the kernel SIGTERMs it when chaos dies,
however chaos dies), so a killed chaos never leaves a supervisor that respawns workers and the dev
server behind `stop`'s back. Where chaos's schedule kills the supervisor, a standby (`supervise --standby`,
which waits for the home's supervisor lock) is recorded beside it: `stop` ends the standby first, so
it never takes over from the one `stop` ends."""

from __future__ import annotations

import contextlib
from pathlib import Path

from checkpoint_tui.ops.procs import ProcIdentity, read_json, stop_process, write_json
from checkpoint_tui.settings import Settings

RECORD = "chaos-supervisor.json"


def _path(settings: Settings) -> Path:
    return settings.run_dir / RECORD


def record(settings: Settings, ident: ProcIdentity | None, standby: ProcIdentity | None = None) -> None:
    write_json(
        _path(settings),
        {"identity": ident and ident.to_dict(), "standby": standby and standby.to_dict()},
    )


def forget(settings: Settings) -> None:
    with contextlib.suppress(FileNotFoundError):
        _path(settings).unlink()


def recorded(settings: Settings, role: str = "identity") -> ProcIdentity | None:
    """The recorded supervisor (`role` "standby": its standby) if it is still that process and a
    `supervise` of this home."""
    record = read_json(_path(settings)) or {}
    ident = ProcIdentity.from_record({"identity": record.get(role)})
    if ident is None or not ident.matches_live():
        return None
    if not (ident.runs("supervise") and ident.runs("--home", str(settings.home)) and ident.runs("--bound-to")):
        return None  # a forged record naming another process (a user's own `supervise` too): never signalled
    if role == "standby" and not ident.runs("--standby"):
        return None
    return ident


def stop(settings: Settings) -> int | None:
    """Stop the recorded chaos supervisor (SIGTERM, then SIGKILL), its standby first; the supervisor's
    pid, or None if none ran."""
    standby, ident = recorded(settings, "standby"), recorded(settings)
    forget(settings)
    if standby is not None:
        stop_process(standby, grace=5.0)
    if ident is None:
        return None
    stop_process(ident, grace=5.0)
    return ident.pid


def replace_direct_workers(settings: Settings) -> None:
    """Stop the home's live workers (and preloaders) when chaos puts a hop or proxy between the workers and
    Temporal: they were started before it existed (the app's, a `start`'s) and reach Temporal directly, so
    no crash point or partition could land on them; the supervisor chaos starts spawns workers through it.
    Says what it stopped, on stdout (chaos's output)."""
    from checkpoint_tui.ops import worker_proc

    stopped = []
    recorded = worker_proc.load_all(settings)
    for worker in recorded:
        worker_proc.stop(settings, worker)
        worker_proc.forget(settings, worker.role, worker.slot)
        stopped.append(f"{worker.role} {worker.pid}")
    for worker in worker_proc.unrecorded(settings, {w.pid for w in recorded}):  # a dead supervisor's spawn
        worker_proc.stop(settings, worker)
        stopped.append(f"unrecorded {worker.pid}")
    if stopped:
        print(f"chaos: stopped the lab's workers ({', '.join(stopped)}): they reach Temporal directly", flush=True)
