"""The supervisor process chaos runs beside it (`checkpoint-tui supervise --bound-to PID`): bound to chaos
(it dies with it), recorded for `stop`, SIGKILLed by the `supervisor` nemesis and spawned again (the new
one adopts the workers), stopped with SIGTERM when chaos ends."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

from checkpoint_tui.errors import Failed
from checkpoint_tui.ops import chaos_supervisor
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.procs import identity_after_exec
from checkpoint_tui.proof.nemeses.records import Hit
from checkpoint_tui.settings import Settings

READY_S = 60.0  # its first line ("supervising ...") once its workers are up
STOP_S = 15.0  # a SIGTERMed supervisor stops its watch loop (and lets latency measurements land)


class SupervisorChild:
    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None

    async def spawn(self, settings: Settings, flags: list[str]) -> None:
        """`flags`: the global ones beyond --home (the workload's workers, queue, pool, server)."""
        log = open_log(settings.run_dir, "chaos-supervisor.log")  # capped and rotated (ops/logcap.py)
        cmd = [sys.executable, "-m", "checkpoint_tui", "--home", str(settings.home), *flags]
        cmd += ["supervise", "--bound-to", str(os.getpid())]
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *cmd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=log.fd,
                env=settings.child_env(),
                cwd=settings.worker_cwd,
            )
        finally:
            log.close()  # the child holds its own copy
        ident = await asyncio.to_thread(identity_after_exec, self.proc.pid, cmd)
        if ident is not None:
            chaos_supervisor.record(settings, ident)
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), READY_S)
        if not line.startswith(b"supervising"):
            raise Failed(f"the supervisor did not start; see {settings.run_dir / 'chaos-supervisor.log'}")

    async def kill(self) -> Hit:
        """SIGKILL it (our own child: no pid reuse before we reap it); the hit."""
        assert self.proc is not None
        pid, at = self.proc.pid, time.time()
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        return Hit(at, pid)

    async def stop(self, settings: Settings) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), STOP_S)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        chaos_supervisor.forget(settings)
