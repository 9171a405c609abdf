"""The one key shape behind every framework's helper: workflow id + the framework's tool call id."""

from __future__ import annotations

import hashlib
import json

from checkpoint_tui.effects import KEY_LIMIT, EffectRefused


def call_key(framework: str, call_id: object) -> str:
    """The business key of one tool call of the calling activity's workflow: `<framework>:<workflow
    id>:<call id>`, readable when the workflow id holds no ':' (else two ids could join into one key)
    and the whole is printable and at most KEY_LIMIT characters; otherwise `<framework>#sha256:<hex>`
    (a shape the readable form never takes). Raises EffectRefused outside an activity or without a
    usable call id: a tool call with no durable identity cannot be keyed."""
    from temporalio import activity  # a worker's tool has it loaded; reading histories does not need it

    if not activity.in_activity():
        raise EffectRefused(f"a {framework} tool call key names an activity's workflow: call it in the tool's activity")
    workflow_id = activity.info().workflow_id or ""
    if not isinstance(call_id, str) or not call_id or not workflow_id:
        raise EffectRefused(f"{framework} tool call key: no tool call id (got {type(call_id).__name__}) or workflow id")
    plain = f"{framework}:{workflow_id}:{call_id}"
    if ":" not in workflow_id and len(plain) <= KEY_LIMIT and plain.isprintable():
        return plain
    digest = hashlib.sha256(json.dumps([workflow_id, call_id]).encode("ascii")).hexdigest()  # ensure_ascii
    return f"{framework}#sha256:{digest}"
