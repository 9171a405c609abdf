"""The lab's side of a team's data converter (--data-converter MODULE:ATTR): a PayloadCodec on the lab's
Temporal client that hands every payload to the converter's own process (ops/converter_proc.py) and back.

The lab itself speaks plain JSON: what it starts a run with is encoded by the team's converter (payload
converter and codec) on its way to Temporal, and every payload of a history the lab reads is decoded
back to JSON (core/chain.py), so the audit reads tool names and call ids as the team's workers wrote
them. A payload the team's converter cannot read keeps its bytes and gets the encoding
`binary/undecodable` with the converter's one-line error: named, never guessed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from checkpoint_tui.errors import Unavailable, UsageError

UNDECODABLE = b"binary/undecodable"  # a payload the team's converter could not read (its error in `error`)
START_WAIT_S = 30.0  # the converter's imports (a team's whole worker module may come with it)
ANSWER_WAIT_S = 30.0  # one batch through the team's converter
BATCH = 256  # payloads a request
MAX_LINE = 64 * 1024 * 1024


class RemoteCodec(PayloadCodec):
    """The team's converter, one process for the lab's lifetime, started at the first payload."""

    def __init__(self, spec: str, cwd: Path, env: dict[str, str]) -> None:
        """Nothing starts yet: the process comes with the first payload."""
        self.spec, self.cwd, self.env = spec, cwd, env
        self.converter: str | None = None  # the team's payload converter's and codec's classes, once started
        self.undecodable = 0  # payloads the team's converter could not read, and its first error
        self.first_error: str | None = None
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out, errors = await self._ask("encode", payloads)
        if bad := next((e for e in errors if e), None):
            raise UsageError(f"--data-converter {self.spec} cannot encode the input: {bad}")
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out, errors = await self._ask("decode", payloads)
        said = [e for e in errors if e]
        self.undecodable += len(said)
        self.first_error = self.first_error or next(iter(said), None)
        return [mark_undecodable(p, e) if e else q for p, q, e in zip(payloads, out, errors, strict=True)]

    async def _ask(self, op: str, payloads: Sequence[Payload]) -> tuple[list[Payload], list[str | None]]:
        out: list[Payload] = []
        errors: list[str | None] = []
        async with self._lock:  # one conversation on the pipe at a time
            for i in range(0, len(payloads), BATCH):
                batch = payloads[i : i + BATCH]
                reply = await self._round(op, batch)
                texts, said = reply.get("payloads"), reply.get("errors")
                if not isinstance(texts, list) or not isinstance(said, list) or len(texts) != len(batch):
                    raise Unavailable(f"--data-converter {self.spec}: {reply.get('error') or 'a malformed answer'}")
                for payload, text, error in zip(batch, texts, said, strict=False):
                    parsed = _parse(text) if isinstance(text, str) and not error else None
                    errors.append(None if parsed is not None else str(error or "a malformed payload")[:200])
                    out.append(parsed or payload)
        return out, errors

    async def _round(self, op: str, batch: Sequence[Payload]) -> dict:
        proc = await self._started()
        assert proc.stdin is not None and proc.stdout is not None
        request = {"op": op, "payloads": [base64.b64encode(p.SerializeToString()).decode() for p in batch]}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), ANSWER_WAIT_S)
            reply = json.loads(line) if line else None
        except (TimeoutError, OSError, ValueError, asyncio.LimitOverrunError):
            reply = None
        if not isinstance(reply, dict):
            await self.close()
            raise Unavailable(f"--data-converter {self.spec}: its process stopped answering ({op})")
        return reply

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
            hello = json.loads(await asyncio.wait_for(proc.stdout.readline(), START_WAIT_S) or b"{}")
        except (TimeoutError, ValueError):
            hello = {}
        if not isinstance(hello, dict) or hello.get("ready") is not True:
            await self.close()
            said = hello.get("error") if isinstance(hello, dict) else None
            raise UsageError(f"--data-converter {self.spec}: {said or 'its process did not start'}")
        self.converter = str(hello.get("converter") or "")[:200] or None
        return proc

    def describe(self) -> str:
        return f"--data-converter {self.spec} ({self.converter or 'not started'})"

    async def close(self) -> None:
        """Ends the process (closing its stdin ends it; a kill if it does not go)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 2.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def _parse(text: str) -> Payload | None:
    payload = Payload()
    try:
        payload.ParseFromString(base64.b64decode(text, validate=True))
    except Exception:  # not base64, or not a Payload (protobuf's DecodeError): the answer is malformed
        return None
    return payload


def mark_undecodable(payload: Payload, error: str) -> Payload:
    """The payload as it was, marked as one the team's converter could not read, with why."""
    marked = Payload()
    marked.CopyFrom(payload)
    marked.metadata["encoding"] = UNDECODABLE
    marked.metadata["error"] = error.encode()[:200]
    return marked
