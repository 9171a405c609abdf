"""The supervisor's states, shared with whatever displays them."""

from __future__ import annotations

from enum import StrEnum


class SupervisorState(StrEnum):
    STARTING = "starting"  # adopting or spawning the pool
    RUNNING = "running"  # every slot has a live worker
    WORKER_DEAD = "worker-dead"  # a worker died; its slot is empty
    RESPAWNING = "respawning"  # promoting the spare or spawning into the dead worker's slot
    TEMPORAL_DOWN = "temporal-down"  # the embedded dev server died; restarting it
    STOPPED = "stopped"  # stopped, its workers stopped too
