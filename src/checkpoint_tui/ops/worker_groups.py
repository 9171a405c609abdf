"""The process groups of a user's worker commands, tracked apart from their leaders. A worker command
runs in a session of its own and may fork its real worker and exit: the group then outlives its
leader (and the leader's worker record), still polling with this home's CHECKPOINT_HOME.
run/group-<pgid>.json holds the leader's identity from its start; `stop` ends every member left in
the group, each signalled by its own identity (pidfd-pinned, as every signal of the lab is).

A member is a live process whose session and process group are both the leader's pid, started no
earlier than the leader, with this home's CHECKPOINT_HOME in its initial environment. The kernel
does not hand out a pid that is still some group's id, so while any member lives the number cannot
name another process's group. A member that starts a session of its own has left the group and is
not found (it has left the lab's control as a daemon would)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from functools import partial
from pathlib import Path

import psutil

from checkpoint_tui.ops.procs import (
    ProcIdentity,
    read_json,
    send_signal_if_ours,
    started_before,
    started_with,
    write_json,
)
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync

CREATE_SLACK_S = 0.05  # create times are in clock ticks


def record_path(settings: Settings, pgid: int) -> Path:
    return settings.run_dir / f"group-{pgid}.json"


def record_group(settings: Settings, leader: ProcIdentity) -> None:
    write_json(record_path(settings, leader.pid), {"identity": leader.to_dict(), "saved_at": time.time()})


def forget_group(settings: Settings, pgid: int) -> None:
    record_path(settings, pgid).unlink(missing_ok=True)


def members(settings: Settings, leader: ProcIdentity) -> list[ProcIdentity]:
    """The group's live members (the leader too, if it still runs)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        pid = proc.info["pid"]
        try:
            if os.getpgid(pid) != leader.pid or os.getsid(pid) != leader.pid:
                continue
        except OSError:  # gone meanwhile
            continue
        if started_before(pid, leader, CREATE_SLACK_S) is not False:  # older than its group (a reused pgid), or gone
            continue
        if started_with(pid, "CHECKPOINT_HOME") != str(settings.home):
            continue
        ident = ProcIdentity.of(pid)
        if ident is not None and ident.exists():
            found.append(ident)
    return found


def stop_group(settings: Settings, leader: ProcIdentity, grace: float = 5.0) -> list[int]:
    """SIGTERM every member, SIGKILL whoever is left after `grace` (members looked up again: one may
    have been mid-exec the first time); returns the pids signalled."""
    signalled: list[int] = []
    for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        targets = [m for m in members(settings, leader) if send_signal_if_ours(m, sig)]
        signalled += [m.pid for m in targets if m.pid not in signalled]
        if targets and wait_until_sync(partial(_all_gone, targets), wait_s):
            break
    return signalled


def leftover_groups(settings: Settings) -> list[ProcIdentity]:
    """The leaders of recorded groups that still have members; a record of a group with none left is
    removed (nothing of it runs)."""
    left = []
    for path in sorted(settings.run_dir.glob("group-*.json")):
        leader = ProcIdentity.from_record(read_json(path))
        if leader is None or path.name != record_path(settings, leader.pid).name:
            with contextlib.suppress(OSError):
                path.unlink()  # malformed, or naming another group than its file: not ours to follow
            continue
        if members(settings, leader):
            left.append(leader)
        else:
            forget_group(settings, leader.pid)
    return left


def _all_gone(members: list[ProcIdentity]) -> bool:
    return not any(m.exists() for m in members)
