"""The supervisor process chaos runs beside it (`checkpoint-tui supervise --bound-to PID`): bound to chaos
(it dies with it), recorded for `stop`, SIGKILLed by the `supervisor` nemesis and succeeded (the new
one adopts the workers), stopped with SIGTERM when chaos ends.

Where the schedule kills it, a standby (`supervise --standby`) is started beside it: its interpreter
and imports paid for while the run goes on, it waits for the home's supervisor lock and takes over
once the lock is let go (the kill; any end of the supervisor). A successor started only after the kill
would start an interpreter first: seconds on a loaded machine, in which a short run can end before
the schedule's next events."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from checkpoint_tui.errors import Failed
from checkpoint_tui.ops import chaos_supervisor
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.procs import ProcIdentity, identity_after_exec
from checkpoint_tui.proof.nemeses.records import Hit
from checkpoint_tui.settings import Settings

READY_S = 60.0  # its first line ("supervising ...") once its workers are up
STOP_S = 15.0  # a SIGTERMed supervisor stops its watch loop (and lets latency measurements land)


class SupervisorChild:
    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.standby: asyncio.subprocess.Process | None = None
        self._idents: dict[int, ProcIdentity | None] = {}
        self.attempts_by_hop = False  # chaos's hop fails a dead worker's attempts (proof/nemeses/handed.py)

    async def spawn(self, settings: Settings, flags: list[str], standby: bool = False) -> None:
        """`flags`: the global ones beyond --home (the workload's workers, queue, pool, server). Returns
        once it supervises; `standby`: with a standby beside it, for a kill to come."""
        self.proc = await self._start(settings, flags)
        await self._ready(settings, self.proc)
        if standby:
            self.standby = await self._start(settings, flags, standby=True)

    async def succeed(self, settings: Settings, flags: list[str], standby: bool) -> None:
        """After a kill: the standby takes over (a fresh one when there is none); returns once it
        supervises. `standby`: another kill is to come, so a new standby starts beside it."""
        if self.standby is None or self.standby.returncode is not None:
            await self.spawn(settings, flags, standby)
            return
        self.proc, self.standby = self.standby, None
        self._record(settings)
        await self._ready(settings, self.proc)
        if standby:
            self.standby = await self._start(settings, flags, standby=True)

    async def _start(self, settings: Settings, flags: list[str], standby: bool = False) -> asyncio.subprocess.Process:
        """Start one (recorded at once, for `stop`); a standby is recorded as the standby."""
        log = open_log(settings.run_dir, "chaos-supervisor.log")  # capped and rotated (ops/logcap.py)
        cmd = [sys.executable, "-m", "checkpoint_tui", "--home", str(settings.home), *flags]
        cmd += ["supervise", "--bound-to", str(os.getpid()), *(["--standby"] if standby else [])]
        cmd += ["--attempts-by-hop"] if self.attempts_by_hop else []
        try:
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=log.fd,
                env=settings.child_env(),
                cwd=settings.worker_cwd,
            )
        finally:
            log.close()  # the child holds its own copy
        if standby:  # known before any await: a chaos cancelled in the next one still stops it
            self.standby = proc
        else:
            self.proc = proc
        self._idents[proc.pid] = await asyncio.to_thread(identity_after_exec, proc.pid, cmd)
        self._record(settings)
        return proc

    async def _ready(self, settings: Settings, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), READY_S)
        if not line.startswith(b"supervising"):
            raise Failed(f"the supervisor did not start; see {settings.run_dir / 'chaos-supervisor.log'}")

    def _record(self, settings: Settings) -> None:
        def ident(proc: asyncio.subprocess.Process | None) -> ProcIdentity | None:
            return None if proc is None else self._idents.get(proc.pid)

        chaos_supervisor.record(settings, ident(self.proc), ident(self.standby))

    async def kill(self) -> Hit | None:
        """SIGKILL it (our own child: no pid reuse before we reap it); the hit. None: it had ended on its
        own (its standby took the lock then)."""
        assert self.proc is not None
        if self.proc.returncode is not None:
            return None
        pid, at = self.proc.pid, time.time()
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        return Hit(at, pid)

    async def stop(self, settings: Settings) -> None:
        for proc in (self.standby, self.proc):  # the standby first: it would take over from the other
            if proc is not None and proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), STOP_S)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
        chaos_supervisor.forget(settings)
