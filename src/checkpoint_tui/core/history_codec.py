"""A history read through the lab client's payload codec: with --data-converter (ops/remote_codec.py) or a
codec server (ops/codec_client.py), every payload of the events decoded to the plain JSON the audit reads
(tool names, call ids), in copies: what Temporal holds (encrypted, as the team's workers wrote it) is
what replay runs and exports write. Temporal's API returns history as written; the SDK decodes only
what it converts itself."""

from __future__ import annotations

from temporalio.api.common.v1 import Payload
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.converter import PayloadCodec

from checkpoint_tui.ops.codec_count import Counted

MAX_PAYLOADS = 20_000  # decoded per execution read; past it, counted as not read (the audit is blind there)
MAX_DEPTH = 24  # nesting followed into an event (a failure's cause chain included); deeper: not read, counted
# Search attributes are indexed by the server, never through a codec: left as they are.
SKIPPED = frozenset({"search_attributes", "indexed_fields"})
PAYLOAD = Payload.DESCRIPTOR.full_name


class Found:
    """The payloads found in events, and how many a bound left out."""

    def __init__(self) -> None:
        self.payloads: list[Payload] = []
        self.left_out = 0


def payloads_in(message, found: Found, depth: int = 0) -> None:
    """Every Payload inside `message` (repeated, in maps, nested), appended to `found` in event order."""
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE or field.name in SKIPPED:
            continue
        entry = field.message_type
        if entry.GetOptions().map_entry:  # map<string, Payload> (a header, a memo) or of messages
            values = entry.fields_by_name["value"]
            if values.type == values.TYPE_MESSAGE:
                _each(list(value.values()), values.message_type.full_name == PAYLOAD, found, depth)
            continue
        items = [value] if hasattr(value, "DESCRIPTOR") else list(value)  # one message, or a repeated field
        _each(items, entry.full_name == PAYLOAD, found, depth)


def _each(items: list, are_payloads: bool, found: Found, depth: int) -> None:
    for item in items:
        if are_payloads:
            if len(found.payloads) < MAX_PAYLOADS:
                found.payloads.append(item)
            else:
                found.left_out += 1
        elif depth < MAX_DEPTH:
            payloads_in(item, found, depth + 1)
        else:
            found.left_out += 1  # whatever it holds is not read: one, at least


async def decoded(client: Client, events: list) -> list:
    """The events with their payloads decoded by the client's payload codec (copies); the same list
    without one (a stand-in client has no data converter)."""
    codec: PayloadCodec | None = getattr(getattr(client, "data_converter", None), "payload_codec", None)
    if codec is None or not events:
        return events
    copies = []
    for ev in events:
        copy = HistoryEvent()
        copy.CopyFrom(ev)
        copies.append(copy)
    found = Found()
    for ev in copies:
        payloads_in(ev, found)
    if found.left_out and isinstance(codec, Counted):
        codec.not_read(found.left_out, f"{found.left_out} payload(s) past the lab's bounds (count, nesting)")
    plain = await codec.decode(found.payloads)
    for payload, value in zip(found.payloads, plain, strict=True):
        if value is not payload:
            payload.CopyFrom(value)
    return copies
