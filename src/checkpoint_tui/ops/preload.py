"""The preloaded spare of a user's Python worker command: a preloader process per command of the fleet
(ops/preloader.py, run in the user's own Python) holds the command's imports; when a worker of that
command dies, the supervisor asks it for a fork, which runs the script as `__main__` and is the slot's
new worker. The cold start it skips is mostly imports (the agent frameworks: 2 to 3.5 s).

Only `PYTHON [FLAGS] SCRIPT` and `PYTHON [FLAGS] -m MODULE` commands are preloaded; any other command
keeps cold starts, and so does a command whose imports leave a thread running (a fork copies only the
forking thread): its preloader says why and exits, and the supervisor records it in a worker event.
A command's --deploy version (its new version in a rollout) starts cold.

Files: run/preloader-<i>.json is its record (as a worker's: worker_proc, role "preloader", slot i, the
fleet command's index); run/preloader-<i>.ready what it says (ready, or why not); `.ready.child` the
pid of its newest fork; `.ready.exits` how each fork ended (it is their parent: it reaps them).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import psutil

from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import fleet, worker_proc
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.preloader import FLAGS, parse
from checkpoint_tui.ops.procs import ProcIdentity, read_json, send_signal_if_ours
from checkpoint_tui.ops.user_worker import default_identity, identity_after_user_exec, user_command
from checkpoint_tui.ops.worker_proc import PRELOADER, WorkerProc
from checkpoint_tui.settings import FleetMember, Settings
from checkpoint_tui.waiting import wait_until_sync

SCRIPT = Path(__file__).with_name("preloader.py")
PYTHON = re.compile(r"python(\d+(\.\d+)*)?$")
MAX_DEATHS = 3  # a preloader that keeps dying costs a core for seconds each time: cold starts instead
FORK_WAIT_S = 2.0  # a fork, its setsid and a 20-byte file: milliseconds, unless the machine is swapping
READY_WAIT_S = 60.0  # a first worker waits this long for its preloader's imports, then starts cold


def not_preloadable(cmd: tuple[str, ...]) -> str | None:
    """Why the command cannot have a preloaded spare (None: it can)."""
    if not cmd or not PYTHON.match(Path(cmd[0]).name):
        return "not a Python command"
    try:
        parse(list(cmd))
    except ValueError as err:
        return str(err)
    return None


def default_pool(settings: Settings) -> int:
    """--workers when not given: 1, or 2 for a user's commands none of which can be preloaded (a node
    worker, a shell wrapper). Their spare is a second worker that polls: a spare that waits unpolled needs
    code in the worker (an SDK's worker polls from the moment it runs), and a cold start of a node worker
    bundles its workflows again (2-5 s), so the killed attempt would wait for it."""
    commands = [settings.worker_cmd, *(m.cmd for m in settings.fleet)]  # not .members: it names the home's queue
    if not settings.spare or not settings.worker_cmd or any(not_preloadable(cmd) is None for cmd in commands):
        return 1
    return 2


def _ready_path(settings: Settings, index: int) -> Path:
    return settings.run_dir / f"preloader-{index}.ready"


def _instead(pool: int) -> str:
    if pool < 2:
        return "its replacements start cold"
    return f"{pool} of its workers poll, so a killed one's attempt goes to another at once (replacements start cold)"


class Preloads:
    """The preloaders of a fleet's commands, as one supervisor keeps them: started with the pool,
    adopted after a supervisor's death, asked for a fork on a death, stopped with the workers."""

    def __init__(self, settings: Settings, address: str) -> None:
        self.settings, self.address = settings, address
        self.live: dict[int, WorkerProc] = {}  # fleet command index -> its preloader
        self.off: dict[int, str] = {}  # fleet command index -> why it starts cold
        self.announced: set[int] = set()  # preloaders whose readiness is in a worker event
        self.deaths: dict[int, int] = {}  # fleet command index -> its preloaders that died unasked

    def _heard(self, conn: Ledger, index: int, pre: WorkerProc) -> None:
        """What a live preloader said: ready (recorded once), or why it cannot preload (off). Asked on
        every supervisor tick: once it is announced, no file is read."""
        if index in self.announced or (said := self.said(index)) is None:
            return
        if said.get("ok") is not True:
            self._turn_off(conn, index, f"{str(said.get('reason'))[:300]}: its replacements start cold")
            return
        self.announced.add(index)
        detail = f"ready ({said.get('modules')} modules imported in {said.get('seconds')} s)"
        record_worker_event(conn, "preload", pre.pid, pre.name, detail=detail[:200])

    def ensure(self, conn: Ledger) -> None:
        """Each command's preloader running (adopted, else started), unless it is off; a preloader that
        said it cannot preload turns its command off, said once in a worker event."""
        for index, member in enumerate(self.settings.members):
            if index in self.off:
                continue
            if (reason := not_preloadable(member.cmd)) is not None:
                self._turn_off(conn, index, f"{reason}: {_instead(self.settings.pool_size)}")
                continue
            self._keep(conn, index, member)

    def _keep(self, conn: Ledger, index: int, member: FleetMember) -> None:
        have = self.live.get(index)
        if have is not None and have.alive():
            self._heard(conn, index, have)
            return
        if have is not None:  # it died: after saying it cannot preload (then it exits), or otherwise
            said = self.said(index)
            if said is not None and said.get("ok") is not True:
                self._turn_off(conn, index, f"{str(said.get('reason'))[:300]}: its replacements start cold")
                return
            self.deaths[index] = self.deaths.get(index, 0) + 1
            if self.deaths[index] >= MAX_DEATHS:
                self._turn_off(conn, index, f"its preloader died {MAX_DEATHS} times (see run/worker.log)")
                return
        self.live.pop(index, None)
        self.announced.discard(index)
        adopted = worker_proc.load(self.settings, PRELOADER, index)
        other_build = (
            adopted is not None and worker_proc.recorded_build(self.settings, PRELOADER, index) != member.build_id
        )
        if adopted is not None and (other_build or not worker_proc.runs_command(adopted.ident, member.cmd)):
            worker_proc.stop(self.settings, adopted)  # another command's (or version's): this one gets its own
            adopted = None
        if adopted is not None:
            self.live[index] = adopted
            record_worker_event(conn, "adopt", adopted.pid, adopted.name, detail="preloader adopted")
        else:
            self._start(conn, index, member)

    def said(self, index: int) -> dict | None:
        return read_json(_ready_path(self.settings, index))

    def ready(self, index: int) -> bool:
        said = self.said(index)
        return said is not None and said.get("ok") is True and index in self.live

    def _turn_off(self, conn: Ledger, index: int, reason: str) -> None:
        """Cold starts for command `index` from now on; its preloader (if one ran) stopped, the reason said."""
        self.off[index] = reason
        pre = self.live.pop(index, None)
        pid, name = (pre.pid, pre.name) if pre is not None else (None, None)
        record_worker_event(conn, "preload", pid, name, detail=f"no preloaded spare: {reason}")
        if pre is not None:
            worker_proc.stop(self.settings, pre)
            worker_proc.forget(self.settings, PRELOADER, index)

    def _start(self, conn: Ledger, index: int, member: FleetMember) -> None:
        launch = user_command(self.settings, self.address, member)
        ready = _ready_path(self.settings, index)
        for stale in (ready, ready.with_name(ready.name + ".child"), ready.with_name(ready.name + ".exits")):
            stale.unlink(missing_ok=True)
        flags = [a for a in member.cmd[1:3] if a in FLAGS]  # the interpreter's own flags apply to it too
        argv = [member.cmd[0], *flags, str(SCRIPT), "--ready", str(ready), "--", *member.cmd]
        log = open_log(self.settings.run_dir, "worker.log")
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
        ident = identity_after_user_exec(proc.pid, argv)
        if ident is None:
            self._turn_off(conn, index, f"its preloader did not start (exit {proc.poll()})")
            return
        worker = WorkerProc(ident, f"preloader-{proc.pid}", PRELOADER, index, proc, user_cmd=True, queue=member.queue)
        worker_proc.save(self.settings, worker)
        self.live[index] = worker
        detail = f"preloader for {member.queue}: imports the command's modules, then forks a spare on a death"
        record_worker_event(conn, "spawn", worker.pid, worker.name, detail=detail)

    def first(self, conn: Ledger, slot: int) -> WorkerProc | None:
        """The slot's first worker, forked from its command's preloader once that has imported the
        command's modules (a cold start would import them all again beside it: twice the CPU, for a
        worker no sooner polling); None if the preloader cannot preload, dies, or is not ready within
        READY_WAIT_S (then the caller starts one cold)."""
        index = slot // max(1, self.settings.pool_size)
        pre = self.live.get(index)
        if pre is None or index in self.off:
            return None
        wait_until_sync(lambda: self.said(index) is not None or not pre.alive(), READY_WAIT_S, every=0.01)
        if pre.alive():
            self._heard(conn, index, pre)  # ready said in its event, or turned off saying why
        return self._fork(slot, "spawn", "active worker (slot {slot}, forked from preloader {pre})")

    def fork(self, slot: int, dead: int, run_id: str | None = None, step: int | None = None) -> WorkerProc | None:
        """A new worker for the slot (replacing the worker pid `dead`), forked from its command's ready
        preloader; None if there is none (then the caller starts one cold)."""
        detail = f"replaces {dead} (forked from preloader {{pre}}, slot {{slot}}, {{queue}})"
        return self._fork(slot, "promote", detail, run_id, step)

    def _fork(
        self, slot: int, kind: str, detail: str, run_id: str | None = None, step: int | None = None
    ) -> WorkerProc | None:
        """A fork of the slot's command's ready preloader as the slot's worker, recorded in a `kind`
        worker event (`detail` names {pre}, {slot} and {queue}); None if there is none."""
        member = fleet.member_of(self.settings, slot)
        index = slot // max(1, self.settings.pool_size)
        pre = self.live.get(index)
        if member is None or index >= len(self.settings.members) or member != self.settings.members[index]:
            return None  # a --deploy command's slot: cold
        if pre is None or not pre.alive() or not self.ready(index):
            return None
        child_file = _ready_path(self.settings, index).with_name(f"preloader-{index}.ready.child")
        child_file.unlink(missing_ok=True)
        if not send_signal_if_ours(pre.ident, signal.SIGUSR1):
            return None
        found: list[ProcIdentity] = []

        def forked() -> bool:
            ident = _child(child_file, pre)
            found.extend([ident] if ident is not None else [])
            return bool(found)

        if not wait_until_sync(forked, FORK_WAIT_S, every=0.001):
            return None
        ident = found[0]
        exits = child_file.with_name(f"preloader-{index}.ready.exits")  # its parent reaps it: how it ended
        worker = WorkerProc(
            ident, default_identity(ident.pid), "active", slot, user_cmd=True, queue=member.queue, exits=exits
        )
        worker_proc.save(self.settings, worker)
        said = detail.format(pre=pre.pid, slot=slot, queue=member.queue)
        record_worker_event(connect(self.settings.ledger), kind, worker.pid, worker.name, run_id, step, said)
        return worker

    def stopped(self) -> list[WorkerProc]:
        """The preloaders, handed over to be stopped with the workers (and forgotten here)."""
        live, self.live = list(self.live.values()), {}
        self.announced.clear()
        return live


def _child(path: Path, pre: WorkerProc) -> ProcIdentity | None:
    """The fork the preloader's file names, once it is one: a child of the preloader, with the
    preloader's command line, leading a session of its own (it said its pid after its setsid)."""
    said = read_json(path)
    pid = said.get("pid") if said is not None else None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return None
    ident = ProcIdentity.of(pid)
    try:
        ours = psutil.Process(pid).ppid() == pre.pid and os.getpgid(pid) == pid
    except (psutil.Error, OSError):
        return None
    return ident if ours and ident is not None and ident.cmdline == pre.ident.cmdline else None
