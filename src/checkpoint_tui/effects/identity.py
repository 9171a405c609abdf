"""What names an effect: the key (durable identity from `activity.info()`, or a business key), and the
ledger row it becomes. Everything a caller passes is checked here, before anything is claimed."""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass

from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

from checkpoint_tui.ledger.effects import EffectSpec

KEY_LIMIT = 512  # characters of a business key (the probe line stays under 4 KiB, see probe.py)
PAYLOAD_LIMIT = 64 * 1024  # bytes of a payload, UTF-8: the ledger row holds it
KIND = re.compile(r"[A-Za-z0-9_.-]{1,64}")
STEP_MAX = 2**31 - 1  # the `step` column is a 4-byte INTEGER on PostgreSQL


class EffectRefused(ApplicationError):
    """A call that can never succeed (a bad kind, key or payload): non-retryable, so an activity with
    unlimited retries fails once instead of retrying forever. Raised before anything is claimed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="EffectRefused", non_retryable=True)


@dataclass(frozen=True)
class Identity:
    """The durable identity of the calling activity attempt (empty outside an activity)."""

    workflow_id: str
    run_id: str
    activity_id: str
    attempt: int

    @classmethod
    def current(cls) -> Identity:
        if workflow.in_workflow():
            raise EffectRefused("exactly_once is for activities: workflow code must not do I/O (call an activity)")
        if not activity.in_activity():
            return cls("", "", "", 1)
        info = activity.info()
        run_id = info.workflow_run_id or info.activity_run_id or ""  # the latter: a standalone activity
        return cls(info.workflow_id or "", run_id, info.activity_id, info.attempt)

    @property
    def step(self) -> int:
        """The activity id as the lab's step column: a workflow's activities are numbered 1, 2, ...;
        an id of the caller's choosing that is not a (small) number is step 0."""
        aid = self.activity_id
        return int(aid) if aid.isascii() and aid.isdigit() and len(aid) <= 10 and int(aid) <= STEP_MAX else 0


def check_kind(kind: object) -> str:
    if not isinstance(kind, str):  # never str() a caller's object here: a huge int raises ValueError
        raise EffectRefused(f"kind must be a str, not {type(kind).__name__}")
    if not KIND.fullmatch(kind):
        raise EffectRefused(f"kind must be 1-64 characters of A-Z a-z 0-9 _ . - (got {kind[:80]!r})")
    return kind


def check_write(write: object) -> None:
    if not callable(write):
        raise EffectRefused(f"write must be callable (write(payload)), not {type(write).__name__}")


def effect_key(kind: str, ident: Identity, key: str | None = None) -> str:
    """The ledger id of an effect, namespaced by where it comes from so that no two sources meet (the
    lab's own effects are `<workflow id>:<step>:<kind>`, with lab workflow ids `run-...`):
    - a business key: `key:<key>`;
    - the default: `act:<workflow id>:<run id>:<activity id>:<kind>`, readable when no id holds ':'
      and the identity (without `act:`) is at most KEY_LIMIT printable characters; otherwise
      `act:sha256:<hex of the ids as a JSON list>:<kind>` (one field fewer, so the forms never meet)."""
    if key is not None:
        if not isinstance(key, str):
            raise EffectRefused(f"key must be a str, not {type(key).__name__}")
        if not key or len(key) > KEY_LIMIT or not key.isprintable():
            raise EffectRefused(f"key must be 1-{KEY_LIMIT} printable characters (got {key[:80]!r})")
        return f"key:{key}"
    if not ident.activity_id:
        raise EffectRefused("outside a Temporal activity there is no durable identity: pass key=")
    ids = (ident.workflow_id, ident.run_id, ident.activity_id)
    plain = ":".join((*ids, kind))
    if len(plain) <= KEY_LIMIT and plain.isprintable() and not any(":" in part for part in ids):
        return f"act:{plain}"
    digest = hashlib.sha256(json.dumps(ids).encode("ascii")).hexdigest()  # ensure_ascii: surrogates too
    return f"act:sha256:{digest}:{kind}"


def check_payload(payload: object) -> str:
    if not isinstance(payload, str):
        raise EffectRefused(f"payload must be str, not {type(payload).__name__}")
    try:
        size = len(payload.encode("utf-8"))
    except UnicodeEncodeError:
        raise EffectRefused("payload holds a lone surrogate; it cannot be stored as UTF-8") from None
    if size > PAYLOAD_LIMIT:
        raise EffectRefused(
            f"payload is {size} bytes; the ledger keeps at most {PAYLOAD_LIMIT} (store a reference instead)"
        )
    if "\x00" in payload:
        raise EffectRefused("payload holds a NUL character (PostgreSQL text cannot store it)")
    return payload


def effect_spec(kind: object, payload: object, key: str | None, ident: Identity) -> EffectSpec:
    """The ledger row: id = the key, run_id = the workflow id (the lab's panes and duplicate count
    group by it), step = the activity id if numeric, attempt = the activity attempt."""
    kind = check_kind(kind)
    return EffectSpec(
        run_id=ident.workflow_id,
        step=ident.step,
        kind=kind,
        payload=check_payload(payload),
        attempt=ident.attempt,
        worker_pid=os.getpid(),
        workflow_id=ident.workflow_id,
        key=effect_key(kind, ident, key),
    )
