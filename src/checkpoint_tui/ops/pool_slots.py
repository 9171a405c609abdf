"""How the supervisor fills one slot of its pool at start: adopt the slot's live worker, else promote a
ready spare (our own worker), else fork the user's command's preloader, else spawn. A slot of a user's
fleet names its command and queue (ops/fleet.py), said in the worker event."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import fleet, worker_proc
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.settings import Settings


def where(worker: WorkerProc) -> str:
    """`slot N` (and its queue, for a fleet command) for a worker event's detail."""
    return f"slot {worker.slot}" + (f", {worker.queue}" if worker.queue else "")


@dataclass
class Takeover:
    """A supervisor's start beyond its settings: how a slot's first worker is forked (a user's command's
    preloader), and the workers it found dead, whose pending attempts it fails once it has a client."""

    fork: Callable[[Ledger, int], WorkerProc | None] | None = None
    found_dead: list[WorkerProc] = field(default_factory=list)


def adopt_or_start(
    settings: Settings,
    address: str,
    worker_args: tuple[str, ...],
    conn: Ledger,
    slot: int,
    required: bool,
    takeover: Takeover | None = None,
) -> WorkerProc | None:
    """The slot's worker; one that died between supervisors is recorded, and kept in the takeover for its
    assisted failover."""
    takeover = takeover or Takeover()
    if (dead := worker_proc.found_dead(settings, "active", slot)) is not None:  # it died between supervisors
        record_worker_event(conn, "died", dead.pid, dead.name, detail="found dead by the supervisor that took over")
        takeover.found_dead.append(dead)
    adopted = worker_proc.adoptable(settings, "active", slot)
    if adopted is not None:
        detail = f"active worker adopted ({where(adopted)})"
        record_worker_event(conn, "adopt", adopted.pid, adopted.name, detail=detail)
        return adopted
    if not required:
        return None
    spare = worker_proc.adoptable(settings, "spare")
    if spare is not None and spare.ready(settings) and worker_proc.promote(settings, spare, slot):
        record_worker_event(conn, "promote", spare.pid, spare.name, detail=f"spare promoted at start (slot {slot})")
        return spare
    forked = takeover.fork(conn, slot) if takeover.fork is not None else None  # a user's command's preloader
    if forked is not None:
        return forked
    worker = worker_proc.spawn(settings, address, "active", worker_args, slot)
    record_worker_event(conn, "spawn", worker.pid, worker.name, detail=f"active worker ({where(worker)})")
    return worker


def bring_back(
    settings: Settings, address: str, worker_args: tuple[str, ...], held: set[int], pool: dict[int, WorkerProc]
) -> set[int]:
    """Fill each held slot whose queue's fleet-down hold has ended (or whose new version was deployed) with
    a fresh worker (into `pool`); returns the slots still held."""
    for slot in held:
        if fleet.held_until(settings, fleet.queue_of(settings, slot)) is None and not fleet.standby(settings, slot):
            worker = worker_proc.spawn(settings, address, "active", worker_args, slot)
            pool[slot] = worker
            new = fleet.member_of(settings, slot) in settings.versions  # a new version's first start, not a return
            why = "new version deployed" if new else "back after fleet-down"
            detail = f"{why} (slot {slot}, {worker.queue or settings.task_queue})"
            kind = "spawn" if new else "respawn"
            record_worker_event(connect(settings.ledger), kind, worker.pid, worker.name, detail=detail)
    return {slot for slot in held if slot not in pool}
