"""The lab's side of a team's data converter (--data-converter MODULE:ATTR): a PayloadCodec on the lab's
Temporal client that hands every payload to the converter's own process (ops/converter_proc.py) and back.

The lab itself speaks plain JSON: what it starts a run with is encoded by the team's converter (payload
converter and codec) on its way to Temporal, and every payload of a history the lab reads is decoded
back to JSON for the audit (core/history_codec.py), so it reads tool names and call ids as the team's
workers wrote them. What the team's converter does not make readable is kept, marked and counted
(ops/codec_count.py): named, never guessed.

Each request carries an id its answer repeats; a round that does not complete (a timeout, a
cancellation, a malformed or mismatched answer) ends the process, so no later round reads an earlier
one's answer. The process gets the workers' directory and environment without the lab's secrets.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from checkpoint_tui.errors import Unavailable, UsageError
from checkpoint_tui.ops.codec_count import Counted

START_WAIT_S = 30.0  # the converter's imports (a team's whole worker module may come with it)
ANSWER_WAIT_S = 30.0  # one batch through the team's converter, written and answered
BATCH = 256  # payloads a request at most
BATCH_BYTES = 16 * 1024 * 1024  # and this many bytes: base64 in a line under the process's 64 MiB limit
MAX_LINE = 64 * 1024 * 1024
# What the converter process never needs (the team's code runs in it): the lab's secrets and marks
NOT_FOR_CONVERTER = ("TEMPORAL_API_KEY", "CHECKPOINT_LEDGER_URL", "TEMPORAL_CODEC_AUTH", "CHECKPOINT_WORKER_OF")


class RemoteCodec(Counted, PayloadCodec):
    """The team's converter, one process for the lab's lifetime, started at the first payload."""

    def __init__(self, spec: str, cwd: Path, env: dict[str, str]) -> None:
        """Nothing starts yet: the process comes with the first payload."""
        super().__init__()
        self.spec, self.cwd = spec, cwd
        self.env = {k: v for k, v in env.items() if k not in NOT_FOR_CONVERTER and "TLS_CLIENT_KEY" not in k}
        self.converter: str | None = None  # the team's payload converter's and codec's classes, once started
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)

    def describe(self) -> str:
        return f"--data-converter {self.spec} ({self.converter or 'not started'})"

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out, errors = await self._ask("encode", payloads)
        if bad := next((e for e in errors if e), None):
            raise UsageError(f"--data-converter {self.spec} cannot encode the input: {bad}")
        return [p for p in out if p is not None]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out, errors = await self._ask("decode", payloads)
        return self.checked(payloads, out, errors)

    async def _ask(self, op: str, payloads: Sequence[Payload]) -> tuple[list[Payload | None], list[str | None]]:
        out: list[Payload | None] = []
        errors: list[str | None] = []
        async with self._lock:  # one conversation on the pipe at a time
            for batch in _batches(payloads):
                sendable = [p for p in batch if p.ByteSize() <= BATCH_BYTES]
                reply = await self._round(op, sendable) if sendable else {"payloads": [], "errors": []}
                answers = iter(zip(reply["payloads"], reply["errors"], strict=True))
                for payload in batch:
                    if payload.ByteSize() > BATCH_BYTES:
                        out.append(None)
                        errors.append(f"{payload.ByteSize()} bytes: past the lab's {BATCH_BYTES} per payload")
                        continue
                    text, error = next(answers)
                    parsed = _parse(text) if isinstance(text, str) and not error else None
                    out.append(parsed)
                    errors.append(None if parsed is not None else str(error or "a malformed payload")[:200])
        return out, errors

    async def _round(self, op: str, batch: Sequence[Payload]) -> dict:
        proc = await self._started()
        assert proc.stdin is not None and proc.stdout is not None
        ident = next(self._ids)
        request = {"id": ident, "op": op, "payloads": [base64.b64encode(p.SerializeToString()).decode() for p in batch]}
        reply = None
        try:
            async with asyncio.timeout(ANSWER_WAIT_S):
                proc.stdin.write((json.dumps(request) + "\n").encode())
                await proc.stdin.drain()
                line = await proc.stdout.readline()
            reply = json.loads(line) if line else None
        except (TimeoutError, OSError, ValueError, asyncio.LimitOverrunError):
            reply = None
        except BaseException:  # a cancellation mid-round: its answer would be read by the next round
            await self.close()
            raise
        texts, said = (reply.get("payloads"), reply.get("errors")) if isinstance(reply, dict) else (None, None)
        whole = isinstance(texts, list) and isinstance(said, list) and len(texts) == len(said) == len(batch)
        if not whole or reply.get("id") != ident:  # type: ignore[union-attr]
            await self.close()
            why = reply.get("error") if isinstance(reply, dict) else None
            raise Unavailable(f"--data-converter {self.spec}: {why or 'its process stopped answering'} ({op})")
        return {"payloads": texts, "errors": said}

    async def _started(self) -> asyncio.subprocess.Process:
        if self._proc is not None and self._proc.returncode is None:
            return self._proc
        self._proc = proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "checkpoint_tui.ops.converter_proc",
            self.spec,
            cwd=self.cwd,
            env=self.env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=MAX_LINE,
            start_new_session=True,  # a terminal's Ctrl-C is the lab's to handle; it ends this at exit
        )
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(START_WAIT_S):
                hello = json.loads(await proc.stdout.readline() or b"{}")
        except (TimeoutError, ValueError, asyncio.LimitOverrunError):
            hello = {}
        except BaseException:
            await self.close()
            raise
        if not isinstance(hello, dict) or hello.get("ready") is not True:
            await self.close()
            said = hello.get("error") if isinstance(hello, dict) else None
            raise UsageError(f"--data-converter {self.spec}: {said or 'its process did not start'}"[:400])
        self.converter = str(hello.get("converter") or "")[:200] or None
        return proc

    async def close(self) -> None:
        """Ends the process and its group (closing its stdin ends it; a SIGKILL if it does not go)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), 2.0)
        except (TimeoutError, asyncio.CancelledError):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the team's code may have forked
            with contextlib.suppress(asyncio.CancelledError):
                await proc.wait()


def _batches(payloads: Sequence[Payload]) -> list[Sequence[Payload]]:
    """At most BATCH payloads and about BATCH_BYTES a request."""
    out: list[Sequence[Payload]] = []
    start, size = 0, 0
    for i, p in enumerate(payloads):
        size += p.ByteSize()
        if i > start and (i - start >= BATCH or size > BATCH_BYTES):
            out.append(payloads[start:i])
            start, size = i, p.ByteSize()
    if start < len(payloads):
        out.append(payloads[start:])
    return out


def _parse(text: str) -> Payload | None:
    payload = Payload()
    try:
        payload.ParseFromString(base64.b64decode(text, validate=True))
    except Exception:  # not base64, or not a Payload (protobuf's DecodeError): the answer is malformed
        return None
    return payload
