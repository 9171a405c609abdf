"""A fleet of a user's worker commands, each on its own task queue (`--worker QUEUE=CMD`, repeatable;
`--worker-cmd CMD` is a one-command fleet on the workflow's queue), as the supervisor keeps it.

Slots: each command has `--workers N` slots (default 1), command i the slots i*N .. i*N+N-1, so a slot
always names the same command and queue, across a supervisor's death and its successor's adoption.
With --deployment (Worker Versioning), each --deploy command has N slots of its own after those: its
version's workers run beside the old version's while deployed (blue-green), and stand by otherwise.

Fleet events change what a slot runs or whether it runs, through two small files under run/ that the
supervisor (a separate process under chaos) reads; both are written by the nemeses of
proof/nemeses/fleet.py and hold only queue names and times, never a command (a command comes only
from the flags the supervisor was started with):
- run/deployed.json: the queues whose slots run their --deploy command (the new version) now;
- run/fleet-hold.json: queues whose workers must stay down until a wall time (fleet-down), and pids
  stopped gracefully (a rollout's SIGTERM): no assisted failover for those, their exit is the point.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from checkpoint_tui.files import read_json_file
from checkpoint_tui.settings import FleetMember, Settings

DEPLOYED = "deployed.json"
HOLD = "fleet-hold.json"
STATE_LIMIT = 64 * 1024  # these files hold a few queue names and pids


def slot_count(settings: Settings) -> int:
    return max(1, settings.pool_size) * (max(1, len(settings.members)) + len(settings.versions))


def member_slots(settings: Settings, index: int) -> range:
    """The slots of the fleet's command `index`."""
    per = max(1, settings.pool_size)
    return range(index * per, (index + 1) * per)


def member_of(settings: Settings, slot: int) -> FleetMember | None:
    """The command a slot runs (its --deploy command while deployed); None for our own worker."""
    members = settings.members
    index = slot // max(1, settings.pool_size)
    if not members or index >= len(members) + len(settings.versions):
        return None
    if index >= len(members):
        return settings.versions[index - len(members)]  # a new version's slot (Worker Versioning)
    member = members[index]
    if member.build_id is None and member.queue in deployed(settings):  # a rolling deploy: the slot's command
        new = next((d for d in settings.deploys if d.queue == member.queue), None)
        return new or member
    return member


def queue_of(settings: Settings, slot: int) -> str:
    member = member_of(settings, slot)
    return member.queue if member is not None else settings.task_queue


def standby(settings: Settings, slot: int) -> bool:
    """A new version's slot (Worker Versioning) while its queue is not deployed: no worker runs in it."""
    member = member_of(settings, slot)
    return member is not None and member in settings.versions and member.queue not in deployed(settings)


def queues(settings: Settings) -> list[str]:
    """Every queue the fleet polls, the workflow's first."""
    found = [m.queue for m in settings.members] or [settings.task_queue]
    return list(dict.fromkeys(found))


def slots_of(settings: Settings, queue: str | None) -> list[int]:
    """The slots polling `queue` (None: every slot)."""
    return [s for s in range(slot_count(settings)) if queue is None or queue_of(settings, s) == queue]


# --- the state files -------------------------------------------------------------------------------


def _read(settings: Settings, name: str) -> dict:
    path = settings.run_dir / name
    if not path.exists():
        return {}
    try:
        doc = read_json_file(path, name, STATE_LIMIT, follow=False)
    except Exception:  # an unreadable or hostile file: as if absent (it only ever narrows what runs)
        return {}
    return doc if isinstance(doc, dict) else {}


def _write(settings: Settings, name: str, doc: dict) -> None:
    """Atomically, no link followed (run/ is ours and private)."""
    path = settings.run_dir / name
    tmp = path.with_name(f".{name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh)
    os.replace(tmp, path)


def _names(value: object) -> list[str]:
    return [q for q in value if isinstance(q, str)] if isinstance(value, list) else []


def deployed(settings: Settings) -> list[str]:
    """Queues whose slots run their --deploy command now."""
    return _names(_read(settings, DEPLOYED).get("queues"))


def set_deployed(settings: Settings, queue: str, on: bool) -> None:
    now = [q for q in deployed(settings) if q != queue] + ([queue] if on else [])
    _write(settings, DEPLOYED, {"queues": now})


def held_until(settings: Settings, queue: str) -> float | None:
    """While a fleet-down holds this queue (or every queue, "*"), the wall time it ends."""
    holds = _read(settings, HOLD).get("down", {})
    if not isinstance(holds, dict):
        return None
    until = [v for k, v in holds.items() if k in (queue, "*") and isinstance(v, int | float)]
    return max(until) if until and max(until) > time.time() else None


def hold_down(settings: Settings, queue: str | None, until: float) -> None:
    doc = _read(settings, HOLD)
    held = doc.get("down")
    down = {k: v for k, v in (held if isinstance(held, dict) else {}).items() if isinstance(v, int | float)}
    down = {k: v for k, v in down.items() if v > time.time()}
    down[queue or "*"] = max(until, down.get(queue or "*", 0.0))  # two overlapping fleet-downs: the later end
    _write(settings, HOLD, {**doc, "down": down})


def mark_graceful(settings: Settings, pid: int) -> None:
    """The pid is being stopped gracefully (SIGTERM): its exit is a rollout's, not a crash to assist."""
    doc = _read(settings, HOLD)
    pids = [p for p in doc.get("graceful", []) if isinstance(p, int)][-256:]
    _write(settings, HOLD, {**doc, "graceful": [*pids, pid]})


def graceful(settings: Settings, pid: int) -> bool:
    return pid in [p for p in _read(settings, HOLD).get("graceful", []) if isinstance(p, int)]


def clear(settings: Settings) -> None:
    """A new experiment starts from the fleet as configured: nothing deployed, nothing held."""
    for name in (DEPLOYED, HOLD):
        Path(settings.run_dir / name).unlink(missing_ok=True)
