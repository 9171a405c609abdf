"""The activities: `send_receipt` sends one receipt to the mail API (an HTTP POST) through
`checkpoint_tui.effects.exactly_once`, its key also the request's idempotency key; `check_mail_api`
(scheduled by version 2 of the workflow only) asks the mail API whether it is up. With no mail API
configured a receipt is appended to a file instead, so the example runs with no dependency."""

from __future__ import annotations

import asyncio
import fcntl
import http.client
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from checkpoint_tui.effects import default_key, exactly_once

from shared import CHECK_MAIL_API, SEND_RECEIPT, ReceiptInput, decode, parse_receipt_input, receipt_body

KIND = "receipt"  # the effect's kind: part of its default key
HTTP_TIMEOUT_S = 3.0  # connect, and each read: a slow or hung mail API fails the attempt, Temporal retries it
RESPONSE_LIMIT = 4096
_OPEN = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class MailApi:
    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> MailApi:
        """`host:port` (an IPv6 host in brackets); ValueError says what is wrong."""
        host, _, port = text.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not host or not (port.isascii() and port.isdigit() and len(port) <= 5 and 0 < int(port) < 65536):
            raise ValueError(f"MAIL_API must be HOST:PORT, e.g. 127.0.0.1:8025 (got {text[:80]!r})")
        return cls(host, int(port))

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> bytes:
        """One request on a connection of its own; the answer's body (2xx), else an error: non-retryable
        for a 4xx the same request would get again, retryable (a plain exception) for everything else."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=HTTP_TIMEOUT_S)  # never a proxy
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            answer = resp.read(RESPONSE_LIMIT)
        except (OSError, http.client.HTTPException) as err:  # refused, reset, timed out, garbled
            raise MailApiError(f"mail API {self.host}:{self.port}: {type(err).__name__}: {err}") from None
        finally:
            conn.close()
        if 200 <= resp.status < 300:
            return answer
        if 400 <= resp.status < 500 and resp.status not in (408, 429):
            raise ApplicationError(
                f"mail API refused {method} {path}: {resp.status}", type="MailApiRefused", non_retryable=True
            )
        raise MailApiError(f"mail API {self.host}:{self.port} answered {resp.status} to {method} {path}")


class MailApiError(Exception):
    """The mail API is down, slow or failing: retryable, the retry policy decides how often."""


class ReceiptActivities:
    def __init__(self, mail_api: MailApi | None, out_file: Path) -> None:
        self.mail_api, self.out_file = mail_api, out_file

    # The input is a ReceiptInput as JSON, taken undecoded (RawValue, exactly: see workflows.py) and
    # checked by `_check`, so that no input fails the activity with a retryable error.

    @activity.defn(name=SEND_RECEIPT)
    async def send_receipt(self, raw: RawValue = None) -> str:  # type: ignore[assignment]
        """Sends the receipt once per key (the activity's durable identity: retries keep it); returns
        the library's outcome: applied, skipped or recovered."""
        inp = _check(raw)
        key = default_key(KIND)  # the key exactly_once claims, handed to the mail API as well

        def send(body: str) -> None:  # sync: the library runs it on a thread of its own
            if self.mail_api is None:
                append_receipt(self.out_file, key, body)
                return
            headers = {"Content-Type": "application/json", "Idempotency-Key": quote(key, safe=":")}
            self.mail_api.request("POST", "/receipts", body.encode("utf-8"), headers)

        return await exactly_once(kind=KIND, payload=receipt_body(inp), write=send)

    @activity.defn(name=CHECK_MAIL_API)
    async def check_mail_api(self) -> str:
        """Version 2's preflight: "ok" once the mail API answers its health check (no mail API: "file")."""
        if self.mail_api is None:
            return "file"
        await asyncio.to_thread(self.mail_api.request, "GET", "/health")
        return "ok"


def append_receipt(path: Path, key: str, body: str) -> None:
    """The stand-in for the mail API: one JSON line per receipt, as the mail API logs it, appended with
    one O_APPEND write and fsynced, unless a line of this key is there already (checked under an
    exclusive lock): a recovered send, redone after a crash, never adds it twice."""
    line = json.dumps({"key": key, "body": body}, sort_keys=True) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, _OPEN, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "rb") as fh:
            if any(_key_of(existing) == key for existing in fh):
                return
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock


def _key_of(line: bytes) -> object:
    try:
        return json.loads(line).get("key")
    except (ValueError, AttributeError):  # a torn or foreign line
        return None


def _check(raw: RawValue | None) -> ReceiptInput:
    """Activity input is written by whoever can reach the task queue: refuse what cannot be right,
    whatever it holds, with a non-retryable `BadInput`."""
    try:
        value = None if raw is None else decode(lambda: activity.payload_converter().from_payload(raw.payload))
        inp = parse_receipt_input(value)
        if inp.workflow_id != activity.info().workflow_id:
            raise ValueError("workflow_id must be this activity's own workflow id")
    except ValueError as err:
        raise ApplicationError(str(err), type="BadInput", non_retryable=True) from None
    return inp
