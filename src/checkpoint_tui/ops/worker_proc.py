"""Worker processes on disk: spawn detached, record identity in run/, adopt, SIGKILL with a report.

run/worker.pid holds the first active worker's pid; run/worker.json its identity (pid, create time,
command line) and its Temporal identity; run/worker-<slot>.json the same for the other workers of a
pool (--workers N); run/spare.json the same for the warm spare.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import fleet, worker_groups
from checkpoint_tui.ops.exit_reason import log_size, returncode_of, startup_death
from checkpoint_tui.ops.launch import WORKER_MODULE, WORKER_OF_ENV, Launch, our_worker
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.procs import (
    ExitFd,
    ProcIdentity,
    read_json,
    send_signal_if_ours,
    signal_group_if_ours,
    started_with,
    stop_process,
    write_json,
    write_text,
)
from checkpoint_tui.ops.user_worker import user_command
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync


@dataclass
class WorkerProc:
    ident: ProcIdentity
    name: str  # the Temporal worker identity (last_worker_identity of its activities)
    role: str  # "active" | "spare"
    slot: int = 0  # which of the pool's active workers (0 .. N-1); a promoted spare takes the dead one's
    proc: subprocess.Popen | None = field(default=None, repr=False)  # set when it is our own child
    user_cmd: bool = False  # a user's --worker-cmd (ops/user_worker.py), not checkpoint_tui.worker
    queue: str | None = None  # the task queue its fleet command polls (None: the workflow's)
    exits: Path | None = None  # a preloaded spare's fork: where its parent, the preloader, says how it ended

    @property
    def pid(self) -> int:
        return self.ident.pid

    _exit: ExitFd | None = field(default=None, repr=False, compare=False)  # an adopted worker's pidfd

    def alive(self) -> bool:
        if self.proc is not None:  # our own child: waitpid(WNOHANG) is exact and cheap
            return self.proc.poll() is None
        if self._exit is None:  # adopted: pinned once by a pidfd, then asked with one poll(2)
            self._exit = ExitFd.pin(self.ident)
        return self._exit.alive() if self._exit is not None else self.ident.exists()

    def exit_status(self) -> tuple[str | None, int | None]:
        """(signal name, exit code) as observed; only our own child's status can be observed, and a
        preloaded fork's, as its parent reaped it."""
        if self.proc is None:
            return reaped(self.exits, self.pid) if self.exits is not None else (None, None)
        if self.proc.returncode is None:
            try:
                self.proc.wait(timeout=1.0)  # it may be a zombie not yet reaped by poll()
            except subprocess.TimeoutExpired:
                return None, None
        rc = self.proc.returncode
        if rc < 0:
            return signal.Signals(-rc).name, None
        return None, rc

    def ready(self, settings: Settings) -> bool:
        return (settings.run_dir / f"ready-{self.name}").exists()

    def send(self, sig: int) -> bool:
        """Signal it if it is still ours (identity-checked); a user's worker command with its process group."""
        if not self.user_cmd:
            return send_signal_if_ours(self.ident, sig)
        self._follow_exec()
        return signal_group_if_ours(self.ident, sig)

    def _follow_exec(self) -> None:
        """A user's command may exec another program (env VAR=1 cmd, sh -c 'exec cmd'): our own
        un-reaped child keeps its pid and create time, so its new command line is still its own."""
        if self.proc is None or self.proc.poll() is not None:
            return
        now = ProcIdentity.of(self.pid)
        if now is not None and self.ident.same_start(now):
            self.ident = now


EXITS_NAME = r"preloader-\d{1,4}\.ready\.exits"  # ops/preload.py names it
REAPED_WAIT_S = 1.0  # the preloader reaps a fork the moment its SIGCHLD comes
REAPED_TAIL = 16 * 1024  # of the preloader's exits file: the newest lines


def reaped(exits: Path, pid: int, timeout: float = REAPED_WAIT_S) -> tuple[str | None, int | None]:
    """(signal name, exit code) of `pid` as the preloader that forked it wrote them (None, None: not
    said within `timeout`, or unreadable). The file is the user's process's: bounded, checked."""
    found: list[tuple[str | None, int | None]] = []

    def said() -> bool:
        try:  # a FIFO planted there is not waited on, nor read
            fd = os.open(exits, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return False
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            fh.seek(max(0, os.fstat(fd).st_size - REAPED_TAIL))
            lines = fh.read(REAPED_TAIL).splitlines()
        for line in reversed(lines):
            with contextlib.suppress(ValueError, AttributeError, RecursionError):
                rec = json.loads(line)
                if rec.get("pid") == pid:
                    sig, code = rec.get("signal"), rec.get("code")
                    name = signal.Signals(sig).name if isinstance(sig, int) and 0 < sig < 65 else None
                    found.append((name, code if isinstance(code, int) and 0 <= code < 256 else None))
                    return True
        return False

    # its preloader gone, nobody will write it: the first look is the last (a fork whose preloader died
    # was reaped by init; waiting the full second held the supervisor's thread for nothing)
    if not said() and _writer_alive(exits):
        wait_until_sync(said, timeout, every=0.005)
    return found[0] if found else (None, None)


def _writer_alive(exits: Path) -> bool:
    """Whether the preloader that writes `exits` (its record beside it, preloader-<i>.json) still runs."""
    record = exits.with_name(exits.name.removesuffix(".ready.exits") + ".json")
    ident = ProcIdentity.from_record(read_json(record))
    return ident is not None and ident.matches_live()


LEFTOVER = "leftover"  # the role of what is left of a worker command's process group after its leader exited
PRELOADER = "preloader"  # a user's command's preloaded spare (ops/preload.py); its slot is the command's index
VERSION_EVENT = "version"  # the worker event saying which Worker Deployment Version a worker runs


def _record(settings: Settings, role: str, slot: int = 0) -> Path:
    if role == LEFTOVER:  # slot: the group's id
        return worker_groups.record_path(settings, slot)
    if role == "spare":
        return settings.run_dir / "spare.json"
    if role == PRELOADER:
        return settings.run_dir / f"preloader-{slot}.json"
    return settings.run_dir / ("worker.json" if slot == 0 else f"worker-{slot}.json")


def recorded_slots(settings: Settings) -> list[int]:
    """Slots with an active-worker record on disk (live or not)."""
    slots = [0] if _record(settings, "active").exists() else []
    for path in settings.run_dir.glob("worker-*.json"):
        with contextlib.suppress(ValueError):
            slots.append(int(path.stem.split("-", 1)[1]))
    return sorted(slots)


def launch_for(
    settings: Settings, address: str, role: str = "active", extra_args: tuple[str, ...] = (), slot: int = 0
) -> Launch:
    """What to start, chosen once from the settings: the user's own worker command of the slot's fleet
    member (a cold spawn: it has no standby protocol, so role and extra_args do not apply), else ours."""
    if settings.user_worker:
        return user_command(settings, address, fleet.member_of(settings, slot))
    return our_worker(settings, address, role, extra_args)


def spawn(
    settings: Settings, address: str, role: str = "active", extra_args: tuple[str, ...] = (), slot: int = 0
) -> WorkerProc:
    """Start a worker detached, its output appended to run/worker.log; record it once it has exec'd."""
    settings.ensure_dirs()
    launch = launch_for(settings, address, role, extra_args, slot)
    argv = list(launch.argv)
    log_path = settings.run_dir / "worker.log"
    log_start = log_size(log_path)  # appended to: only this start's lines count
    log = open_log(settings.run_dir, "worker.log")  # capped and rotated (ops/logcap.py): a chatty command too
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log.fd,
            stderr=log.fd,
            start_new_session=True,
            cwd=launch.cwd,
            env=launch.env,
        )
    finally:
        log.close()
    ident = launch.execd(proc.pid, argv)
    if ident is None:
        rc = returncode_of(proc)
        log.drained()  # its last words may still be in the pipe
        raise Unavailable(startup_death(launch.what, rc, log_path, log_start, "at once"))
    queue = fleet.queue_of(settings, slot) if launch.user_cmd else None
    name = launch.name_for(proc.pid)
    worker = WorkerProc(ident, name, launch.role, slot, proc, user_cmd=launch.user_cmd, queue=queue)
    save(settings, worker)
    return worker


def save(settings: Settings, worker: WorkerProc) -> None:
    write_json(
        _record(settings, worker.role, worker.slot),
        {
            "identity": worker.ident.to_dict(),
            "name": worker.name,
            "role": worker.role,
            "slot": worker.slot,
            "user_cmd": worker.user_cmd,
            "queue": worker.queue,
            "exits": worker.exits.name if worker.exits is not None else None,
            "build_id": _build_of(settings, worker),  # the Worker Deployment Version its environment names
            "saved_at": time.time(),
        },
    )
    if worker.user_cmd and worker.role != LEFTOVER:  # its group is tracked apart: it may outlive the leader
        worker_groups.record_group(settings, worker.ident)
    if worker.user_cmd and worker.role == "active":
        _say_version(settings, worker)
    if worker.role == "active" and worker.slot == 0:  # a fixed temp name raced a second writer (a crash)
        write_text(settings.run_dir / "worker.pid", f"{worker.pid}\n")


def _build_of(settings: Settings, worker: WorkerProc) -> str | None:
    """The build id its environment names: a slot's member's, a preloader's command's (its slot is the index)."""
    if not worker.user_cmd:
        return None
    if worker.role == PRELOADER:
        members = settings.members
        return members[worker.slot].build_id if worker.slot < len(members) else None
    member = fleet.member_of(settings, worker.slot) if worker.role == "active" else None
    return member.build_id if member is not None else None


def recorded_build(settings: Settings, role: str, slot: int) -> str | None:
    """The build id a worker's record says it was started with (None: unversioned)."""
    value = (read_json(_record(settings, role, slot)) or {}).get("build_id")
    return value if isinstance(value, str) else None


def _say_version(settings: Settings, worker: WorkerProc) -> None:
    """A worker of a Worker Deployment Version (--deployment): which build it runs, as a worker event, so
    the audit names the version of a workflow task it failed (history names only its identity)."""
    if (build := _build_of(settings, worker)) is None:
        return
    detail = {"deployment": settings.deployment, "build_id": build, "queue": worker.queue}
    record_worker_event(connect(settings.ledger), VERSION_EVENT, worker.pid, worker.name, detail=json.dumps(detail))


def load(settings: Settings, role: str = "active", slot: int = 0) -> WorkerProc | None:
    """The recorded worker of this role (and slot) if it is alive and still ours, else None."""
    rec = read_json(_record(settings, role, slot))
    ident = ProcIdentity.from_record(rec)
    if rec is None or ident is None or not isinstance(rec.get("name"), str):
        return None
    user_cmd = rec.get("user_cmd") is True
    if not is_home_worker(settings, ident, user_cmd) or not ident.matches_live():
        return None
    queue = rec.get("queue") if isinstance(rec.get("queue"), str) else None
    exits = rec.get("exits") if isinstance(rec.get("exits"), str) else None  # a name under run/, nothing else
    exits_path = settings.run_dir / exits if exits is not None and re.fullmatch(EXITS_NAME, exits) else None
    return WorkerProc(ident, rec["name"], role, slot, user_cmd=user_cmd, queue=queue, exits=exits_path)


def found_dead(settings: Settings, role: str = "active", slot: int = 0) -> WorkerProc | None:
    """The recorded worker of this role and slot if its process is gone: it died while no supervisor
    watched (a new one finds the record), which its death's event must still say, and whose pending
    attempts its assisted failover must still fail (else they wait out their timeouts)."""
    rec = read_json(_record(settings, role, slot))
    ident = ProcIdentity.from_record(rec)
    if rec is None or ident is None or not isinstance(rec.get("name"), str) or ident.matches_live():
        return None
    queue = rec.get("queue") if isinstance(rec.get("queue"), str) else None
    return WorkerProc(ident, rec["name"][:200], role, slot, user_cmd=rec.get("user_cmd") is True, queue=queue)


def is_home_worker(settings: Settings, ident: ProcIdentity, user_cmd: bool = False) -> bool:
    """A record of ours names this home's worker command, not merely some process of this user (a
    forged record naming another process must not get it signalled). A user's worker command does not
    name the home: the environment we started it with does."""
    if user_cmd:
        return started_for_home(settings, ident.pid)
    return ident.runs("-m", WORKER_MODULE) and ident.runs("--home", str(settings.home))


def started_for_home(settings: Settings, pid: int) -> bool:
    """The process was started with this home's CHECKPOINT_HOME (its initial environment, which the
    program cannot rewrite; readable only for processes of this user)."""
    return started_with(pid, "CHECKPOINT_HOME") == str(settings.home)


def adoptable(settings: Settings, role: str = "active", slot: int = 0) -> WorkerProc | None:
    """load(), but a live worker of the other kind (ours when --worker-cmd is set, a user's command
    when not, or another command than the one given) is stopped instead: it would poll the same task
    queue for workflows it cannot run."""
    worker = load(settings, role, slot)
    if worker is None:
        return None
    member = fleet.member_of(settings, slot)
    same_cmd = not worker.user_cmd or (member is not None and runs_command(worker.ident, member.cmd))
    # started with another --deployment (or none), it polls as another version (or unversioned)
    same_version = not worker.user_cmd or recorded_build(settings, role, slot) == (member and member.build_id)
    if worker.user_cmd == settings.user_worker and same_cmd and same_version:
        return worker
    stop(settings, worker)
    forget(settings, role, slot)
    return None


def runs_command(ident: ProcIdentity, cmd: tuple[str, ...]) -> bool:
    """Its command line is `cmd`, or ends with it (a script run through its #! interpreter)."""
    return bool(cmd) and ident.cmdline[-len(cmd) :] == tuple(cmd)


def load_all(settings: Settings) -> list[WorkerProc]:
    """Every live worker of this home recorded on disk: the pool's active workers, the spare, the
    preloaders of a user's commands, then the process groups of worker commands whose leader exited
    but whose members still run (role LEFTOVER; stop() ends them, forget() drops their record)."""
    found = [w for slot in recorded_slots(settings) if (w := load(settings, "active", slot)) is not None]
    spare = load(settings, "spare")
    found += [spare] if spare is not None else []
    for path in settings.run_dir.glob("preloader-*.json"):
        with contextlib.suppress(ValueError):
            found += [p] if (p := load(settings, PRELOADER, int(path.stem.split("-", 1)[1]))) is not None else []
    pids = {w.pid for w in found}
    return found + [
        WorkerProc(leader, f"group-{leader.pid}", LEFTOVER, leader.pid, user_cmd=True)
        for leader in worker_groups.leftover_groups(settings)
        if leader.pid not in pids
    ]


def unrecorded(settings: Settings, known: set[int]) -> list[WorkerProc]:
    """This home's workers that no record names: one spawned by a supervisor that died before it
    could save the record (it dies with chaos, by the kernel's parent-death signal, at any moment).
    Each must run this home's worker command and have been started with this home's CHECKPOINT_HOME,
    which only spawn() gives it (its initial environment, which the process cannot rewrite)."""
    found = []
    for proc in psutil.process_iter(["pid", "uids"]):
        if proc.pid in known or proc.pid == os.getpid() or proc.info["uids"] is None:
            continue
        if proc.info["uids"].real != os.getuid():
            continue
        ident = ProcIdentity.of(proc.pid)
        if ident is None:
            continue
        ours = is_home_worker(settings, ident) and started_for_home(settings, ident.pid)
        if ours or spawned_for_home(settings, ident.pid):
            found.append(WorkerProc(ident, f"unrecorded-{ident.pid}", LEFTOVER, ident.pid))
    return found


def spawned_for_home(settings: Settings, pid: int) -> bool:
    """A worker spawn of this home or a process it forked, however far it went (a daemon in a session
    of its own, its parent gone): only a worker spawn's environment has WORKER_OF_ENV, and a fork
    inherits it. CHECKPOINT_HOME alone is not enough: a user's shell may export it."""
    return started_with(pid, WORKER_OF_ENV) == str(settings.home)


def forget(settings: Settings, role: str, slot: int = 0) -> None:
    _record(settings, role, slot).unlink(missing_ok=True)


def promote(settings: Settings, spare: WorkerProc, slot: int = 0) -> bool:
    """Tell a ready spare to start polling (SIGUSR1); it becomes the slot's active worker on disk."""
    if not send_signal_if_ours(spare.ident, signal.SIGUSR1):
        return False
    spare.role, spare.slot = "active", slot
    save(settings, spare)
    forget(settings, "spare")
    return True


def stop(settings: Settings, worker: WorkerProc) -> None:
    """Stop it; a user's worker command with its whole process group, members that outlived the
    leader included (identity-checked each)."""
    if worker.user_cmd:
        worker._follow_exec()
    stop_process(worker.ident, grace=5.0, group=worker.user_cmd)
    if worker.user_cmd:
        worker_groups.stop_group(settings, worker.ident)
        worker_groups.forget_group(settings, worker.pid)
    (settings.run_dir / f"ready-{worker.name}").unlink(missing_ok=True)
