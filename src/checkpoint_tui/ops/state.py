"""The supervisor's states and reports, plain data shared with whatever displays them."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class SupervisorState(StrEnum):
    STARTING = "starting"  # adopting or spawning the pool
    RUNNING = "running"  # every slot has a live worker
    WORKER_DEAD = "worker-dead"  # a worker died; its slot is empty
    RESPAWNING = "respawning"  # promoting the spare or spawning into the dead worker's slot
    TEMPORAL_DOWN = "temporal-down"  # the embedded dev server died; restarting it
    STOPPED = "stopped"  # stopped, its workers stopped too


@dataclass
class KillReport:
    pid: int
    signal: str | None  # observed for our own child; for an adopted worker, the signal we sent
    exit_code: int | None  # a SIGKILL leaves none: never invented
    confirmed: bool  # the pid is gone from the process table
    run_id: str | None
    step: int | None
    at: float
    observed: bool  # True if `signal` was read from waitpid, False if it is only what we sent


@dataclass(frozen=True)
class SupervisorStatus:
    """What a display needs, published by the supervisor's thread after every change."""

    state: SupervisorState = SupervisorState.STARTING
    primary_pid: int | None = None
    spare_pid: int | None = None
    pool_pids: list[int] = field(default_factory=list)
    owns_home: bool = False
