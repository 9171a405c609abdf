"""The two sides of the step-through lesson (core/lesson.py), each moved by hand: Next step, Kill,
Restart and finish. They run on the lesson's thread (its own event loop): every spawn, signal, SQL
statement and file read here happens there, never on the app's loop.

What each side reports is read back when it is shown: the emails from the run's outbox file, the
durable run's progress and duplicates from the ledger. The only number taken from a process is the
naive loop's own count of its steps, and that is the point: it is gone when the process is."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from collections import deque
from dataclasses import dataclass

from temporalio.client import Client, WorkflowHandle

from checkpoint_tui.core.runs import launch, model_label, new_run_id, record_run
from checkpoint_tui.errors import Failed
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.artifacts import outbox_counts, outbox_path
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.shared import ALLOW_STEPS_SIGNAL, WORKFLOW_NAME, AgentInput, ModelRef
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.procs import ProcIdentity, identity_after_exec, send_signal_if_ours
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.ops.temporal import connect_client
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until

STEP_WAIT_S = 60.0  # one step of a lesson run takes about a second
EXIT_WAIT_S = 5.0
LOG_KEEP = 6
_DONE = re.compile(rb": step (\d+) done")


@dataclass(frozen=True)
class SideView:
    """One column of the lesson, as read back now."""

    run_id: str | None
    done: int  # naive: the steps its live process reports (its memory); durable: completed steps in the ledger
    emails: int  # lines in the run's outbox file
    repeated: int  # outbox lines beyond the first per email (an email sent twice)
    duplicates: int | None  # durable: COUNT(*) - COUNT(DISTINCT id) over the run's effects; naive: no ledger
    process: str  # who holds the run's progress now
    state: str
    log: tuple[str, ...]
    busy: bool = False


class NaiveSide:
    """`python -m checkpoint_tui.loop_worker.naive --step-by-step`: one step per `next` on its stdin."""

    def __init__(self, settings: Settings, steps: int, pace: float) -> None:
        self.settings, self.steps, self.pace = settings, steps, pace
        self.run_id: str | None = None
        self.proc: asyncio.subprocess.Process | None = None
        self.ident: ProcIdentity | None = None
        self.reported = 0  # what the live process says it has done: its memory, nothing else
        self.state = "not started"
        self.log: deque[str] = deque(maxlen=LOG_KEEP)
        self._reader: asyncio.Task | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def _spawn(self) -> None:
        if self.run_id is None:
            self.run_id = "naive-" + new_run_id().removeprefix("run-")
        argv = [
            sys.executable,
            "-m",
            "checkpoint_tui.loop_worker.naive",
            "--home",
            str(self.settings.home),
            "--run",
            self.run_id,
            "--steps",
            str(self.steps),
            "--pace",
            str(self.pace),
            "--step-by-step",
        ]
        log = open_log(self.settings.run_dir, "naive.log")  # capped and rotated (ops/logcap.py)
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log.fd,
                env=self.settings.child_env(),
            )
        finally:
            log.close()  # the child holds its own copy
        self.ident = await asyncio.to_thread(identity_after_exec, self.proc.pid, argv)
        self.reported = 0
        self._reader = asyncio.create_task(self._read(self.proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            found = _DONE.search(line)
            if found and proc is self.proc:
                self.reported = int(found[1])

    async def _say(self, word: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(f"{word}\n".encode())
        with contextlib.suppress(ConnectionError):  # it died in between: the caller sees it is gone
            await self.proc.stdin.drain()

    async def next_step(self) -> str:
        if self.proc is None:
            await self._spawn()
            assert self.proc is not None
            self.log.append(f"started process {self.proc.pid} (progress in its memory)")
        elif not self.alive:
            return "the naive process is gone: Restart and finish starts a new one"
        if self.reported >= self.steps:
            return "the naive loop has done every step"
        target, proc = self.reported + 1, self.proc
        self.state = f"running step {target}"
        await self._say("next")
        with contextlib.suppress(TimeoutError):
            await wait_until(lambda: self.reported >= target or not self.alive, STEP_WAIT_S, what="a naive step")
        if not self.alive:  # killed in the middle of it: kill() said so
            return f"naive: pid {proc.pid} died during step {target}"
        self.state = f"waiting before step {self.reported + 1}" if self.reported < self.steps else "all steps done"
        self.log.append(f"step {self.reported} done (pid {proc.pid} remembers it)")
        return f"naive: step {self.reported} done"

    async def kill(self) -> str:
        if not self.alive or self.ident is None:
            return "no naive process to kill"
        assert self.proc is not None
        if not send_signal_if_ours(self.ident, signal.SIGKILL):
            return f"pid {self.proc.pid} is no longer ours; not signalled"
        code = await asyncio.wait_for(self.proc.wait(), EXIT_WAIT_S)
        how = signal.Signals(-code).name if code < 0 else f"exit {code}"
        self.state = f"killed ({how}) after step {self.reported}: its progress died with it"
        self.log.append(f"SIGKILL pid {self.proc.pid} after step {self.reported} · observed {how}")
        return f"naive: pid {self.proc.pid} killed ({how})"

    async def finish(self) -> str:
        if not self.alive:
            old = self.proc.pid if self.proc is not None else None
            await self._spawn()
            assert self.proc is not None
            again = f"restarted as {self.proc.pid}: it starts again from step 1" if old else "started"
            self.log.append(f"{again} (pid {old} is gone)" if old else f"started process {self.proc.pid}")
        self.state, proc = "finishing every step", self.proc
        assert proc is not None
        await self._say("finish")
        with contextlib.suppress(TimeoutError):
            await wait_until(lambda: not self.alive, STEP_WAIT_S, what="the naive loop's end")
        if proc.returncode != 0:  # killed on the way (kill() said so), or still going after the wait
            return f"naive: pid {proc.pid} stopped after step {self.reported}"
        self.state = f"finished: pid {proc.pid} did {self.reported} steps, then exited"
        self.log.append(f"pid {proc.pid} did steps 1-{self.reported}")
        return f"naive: finished, {self.reported} steps done by pid {proc.pid}"

    def view(self, busy: bool) -> SideView:
        emails, repeated = self._outbox()
        if self.alive:
            assert self.proc is not None
            process = f"pid {self.proc.pid} · at step {self.reported}/{self.steps} (in its memory)"
        elif self.proc is not None:
            process = f"pid {self.proc.pid} gone · no record of its progress survives"
        else:
            process = "none yet"
        return SideView(
            self.run_id,
            self.reported if self.alive else 0,
            emails,
            repeated,
            None,
            process,
            self.state,
            tuple(self.log),
            busy,
        )

    def _outbox(self) -> tuple[int, int]:
        if self.run_id is None:
            return 0, 0
        return outbox_counts(outbox_path(self.settings.artifacts_dir, self.run_id), exact=True)

    async def close(self) -> None:
        """End of input ends a parked naive loop; one that does not stop is killed."""
        if not self.alive or self.proc is None:
            return
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), EXIT_WAIT_S)
        except TimeoutError:
            if self.ident is not None:
                send_signal_if_ours(self.ident, signal.SIGKILL)
            await asyncio.wait_for(self.proc.wait(), EXIT_WAIT_S)


class DurableSide:
    """A run of this home's AgentLoop started behind a gate (AgentInput.allowed_steps = 0): each Next
    step signals `allow_steps` one step further; the home's supervisor kills and replaces workers."""

    def __init__(self, settings: Settings, address: str, supervisor: Supervisor, steps: int, pace: float) -> None:
        self.settings, self.address, self.supervisor = settings, address, supervisor
        self.steps, self.pace = steps, pace
        self.run_id: str | None = None
        self.state = "not started"
        self.log: deque[str] = deque(maxlen=LOG_KEEP)
        self._client: Client | None = None
        self._handle: WorkflowHandle | None = None

    def _conn(self):
        return connect(self.settings.ledger)

    async def _start(self) -> WorkflowHandle:
        if self._handle is not None:
            return self._handle
        if self._client is None:  # the lesson thread's own client: a client is used from the loop it was made on
            self._client = await connect_client(self.settings, self.address)
        run_id = record_run(self.settings, self.steps, self.pace, (), model_label(ModelRef()))
        inp = AgentInput(run_id, self.steps, self.pace, ModelRef(), allowed_steps=0)
        handle = await launch(self.settings, self._client, run_id, WORKFLOW_NAME, [inp])
        self.run_id, self._handle = run_id, handle
        self.log.append(f"started {run_id}, held before step 1")
        return handle

    def done(self) -> int:
        return queries.count_completed(self._conn(), self.run_id) if self.run_id else 0

    async def next_step(self) -> str:
        handle = await self._start()
        target = self.done() + 1
        if target > self.steps:
            return "the durable run has done every step"
        self.state = f"running step {target}"
        await handle.signal(ALLOW_STEPS_SIGNAL, target)
        await wait_until(lambda: self.done() >= target, STEP_WAIT_S, every=0.05, what=f"durable step {target}")
        self.state = f"held before step {target + 1}" if target < self.steps else "all steps done"
        self.log.append(f"step {target} done · recorded in Temporal's history and the ledger")
        return f"durable: step {target} done"

    async def kill(self) -> str:
        if not self.supervisor.owns_home:
            raise Failed("another supervisor owns this home; kill from there")
        report = await self.supervisor.kill(reason="lesson: Kill (durable side)")
        with contextlib.suppress(TimeoutError):  # the supervisor replaces it (warm spare, else a respawn)
            await wait_until(
                lambda: self.supervisor.status.primary_pid not in (None, report.pid),
                EXIT_WAIT_S,
                what="the replacement worker",
            )
        new = self.supervisor.status.primary_pid
        self.state = f"worker {report.pid} killed; worker {new} carries on from the durable record"
        self.log.append(f"SIGKILL worker {report.pid} · observed {report.signal} · gone={report.confirmed}")
        self.log.append(f"the supervisor put worker {new} in its place")
        return f"durable: worker {report.pid} killed ({report.signal}), worker {new} took over"

    async def finish(self) -> str:
        handle = await self._start()
        await handle.signal(ALLOW_STEPS_SIGNAL, self.steps)
        self.state = f"finishing: the gate is open to step {self.steps}"
        self.log.append(f"gate opened to step {self.steps} · it resumes after step {self.done()}")
        with contextlib.suppress(TimeoutError):
            await wait_until(self._closed, STEP_WAIT_S * 2, every=0.1, what="the durable run's end")
        status = self._status()
        self.state = f"run {status} · {self.done()} steps, each once"
        self.log.append(f"run {status} on worker {self.supervisor.status.primary_pid}")
        return f"durable: run {status}"

    def _status(self) -> str:
        row = queries.run(self._conn(), self.run_id) if self.run_id else None
        return row.status if row else "not started"

    def _closed(self) -> bool:
        return self._status() in ("completed", "failed", "cancelled")

    def view(self, busy: bool) -> SideView:
        emails, repeated, duplicates = 0, 0, 0
        if self.run_id is not None:
            emails, repeated = outbox_counts(outbox_path(self.settings.artifacts_dir, self.run_id), exact=True)
            duplicates = queries.effect_totals(self._conn(), self.run_id).duplicates
        worker = self.supervisor.status.primary_pid
        process = f"worker pid {worker} · at step {self.done()}/{self.steps} (from the ledger)"
        return SideView(
            self.run_id, self.done(), emails, repeated, duplicates, process, self.state, tuple(self.log), busy
        )

    async def close(self) -> None:
        """A run left behind its gate would wait forever: cancel it (the workflow records it)."""
        if self._handle is not None and not self._closed():
            with contextlib.suppress(Exception):
                await self._handle.cancel()
