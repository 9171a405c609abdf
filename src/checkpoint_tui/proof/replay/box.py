"""The parent side of the replay child (replayer.py): each history is sent to a child process and its
answer awaited under a deadline. A core panic (seen on the child's stderr), a hang past the deadline or
a dead child is a failure of that history, with the reason; the child is then killed (our own child,
by its Popen handle) and a fresh one replays the rest."""

from __future__ import annotations

import json
import os
import re
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass

from temporalio.client import WorkflowHistory

from checkpoint_tui.ops.exit_reason import describe_exit
from checkpoint_tui.proof.replay.replayer import Divergence, describe_event, encode_history, workflow_ref

REPLAY_DEADLINE_S = 60.0  # one history, its divergence search included; a real one takes well under 5 s
START_DEADLINE_S = 60.0  # the child importing the SDK and the workflow (~1 s, more on a loaded machine)
STDERR_KEEP = 64 * 1024
PANIC_GRACE_S = 0.3  # after "panicked at", for the rest of the message to arrive
_PANIC = b"panicked at"
_PANIC_EVENT = re.compile(r"event_id: (\d+)")
_PANIC_TAIL = re.compile(r".*\}\)\s*(.+)$")  # after the event dump's last "})"


@dataclass(frozen=True)
class Answer:
    error: str | None
    divergence: Divergence | None
    seconds: float


class ReplayBox:
    """A replay child for one workflow class, respawned after each history it could not answer."""

    def __init__(self, workflow: type, deadline_s: float = REPLAY_DEADLINE_S) -> None:
        self.ref, self.deadline_s = workflow_ref(workflow), deadline_s
        self.proc: subprocess.Popen | None = None
        self._stderr = b""

    def __enter__(self) -> ReplayBox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(self, history: WorkflowHistory) -> Answer:
        started = time.monotonic()
        try:
            if self.proc is None:
                self._start()
            request = {"workflow_id": history.workflow_id, "history": encode_history(history)}
            reply, why = self._ask(json.dumps(request) + "\n", self.deadline_s)
        except OSError as err:  # the child's pipe broke under us
            reply, why = None, f"the replay process could not be reached ({err.strerror or err})"
        if reply is not None:
            where = reply.get("divergence")
            divergence = Divergence(int(where[0]), str(where[1])) if where else None
            return Answer(reply.get("error"), divergence, float(reply.get("seconds") or 0.0))
        divergence = self._panic_event(history)
        self._kill()
        return Answer(why, divergence, time.monotonic() - started)

    def _start(self) -> None:
        self._stderr = b""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "checkpoint_tui.proof.replay.replayer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=os.getcwd(),
        )
        header = {"workflow": self.ref, "sys_path": sys.path, "parent": os.getpid()}
        reply, why = self._ask(json.dumps(header) + "\n", START_DEADLINE_S)
        if reply is None or not reply.get("ready"):
            self._kill()
            raise OSError(0, why or "it did not start")

    def _ask(self, line: str, deadline_s: float) -> tuple[dict | None, str | None]:
        """Send one line, wait for one line back: (the answer, None) or (None, why there is none). The
        write is under the deadline too: a child that stopped reading must not block us."""
        assert self.proc is not None and self.proc.stdin and self.proc.stdout and self.proc.stderr
        pending = line.encode()
        out, err, inp = self.proc.stdout.fileno(), self.proc.stderr.fileno(), self.proc.stdin.fileno()
        os.set_blocking(inp, False)
        got, panic_at = b"", None
        end = time.monotonic() + deadline_s
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            sel.register(err, selectors.EVENT_READ)
            sel.register(inp, selectors.EVENT_WRITE)
            while b"\n" not in got:
                now = time.monotonic()
                if panic_at is not None and now >= panic_at:
                    return None, f"the SDK's core panicked (it would never answer): {self._panic_message()}"
                if now >= end:
                    return None, f"no answer within {deadline_s:g} s: the replay hung (the SDK gave no result)"
                for key, _ in sel.select(timeout=min(end, panic_at or end) - now):
                    if key.fd == inp:
                        pending = pending[os.write(inp, pending) :]
                        if not pending:
                            sel.unregister(inp)
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:  # EOF: the child died
                        return None, self._death()
                    if key.fd == out:
                        got += chunk
                    else:
                        self._stderr = (self._stderr + chunk)[-STDERR_KEEP:]
                        if panic_at is None and _PANIC in self._stderr:
                            panic_at = time.monotonic() + PANIC_GRACE_S
        try:
            return json.loads(got.split(b"\n", 1)[0]), None
        except ValueError:
            return None, "the replay process answered with something that is not JSON"

    def _death(self) -> str:
        assert self.proc is not None
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        last = next((ln for ln in reversed(self._stderr.decode("utf-8", "replace").splitlines()) if ln.strip()), "")
        return f"the replay process {describe_exit(rc)}" + (f"; its last line: {last[:300]!r}" if last else "")

    def _panic_message(self) -> str:
        """The panic's message line, with core's event dump cut down to what it says about the event."""
        text = self._stderr.decode("utf-8", "replace")
        after = text[text.find(_PANIC.decode()) :].splitlines()[1:2]
        line = after[0] if after else ""
        line = line.replace("called `Result::unwrap()` on an `Err` value: ", "")
        tail = _PANIC_TAIL.search(line)
        event = _PANIC_EVENT.search(line)
        if tail and event:
            line = f"{line.split(' Event ', 1)[0]} event {event[1]} {tail[1]}"
        return line[:300] or "no message"

    def _panic_event(self, history: WorkflowHistory) -> Divergence | None:
        if _PANIC not in self._stderr:
            return None
        event = _PANIC_EVENT.search(self._stderr.decode("utf-8", "replace"))
        return describe_event(history, int(event[1])) if event else None

    def _kill(self) -> None:
        """Our own child, by its Popen handle (not yet reaped: its pid cannot have been reused)."""
        if self.proc is None:
            return
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        self.proc = None

    def close(self) -> None:
        """End the child: EOF on its input ends its loop; one that does not go is killed."""
        if self.proc is None:
            return
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self._kill()
