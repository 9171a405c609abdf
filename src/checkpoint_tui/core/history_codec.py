"""A history read through the lab client's payload codec: with --data-converter (ops/remote_codec.py),
every payload of the events, decoded to the plain JSON the audit reads (tool names, call ids), in place.
Temporal's API returns history as the workers wrote it; the SDK decodes only what it converts itself."""

from __future__ import annotations

from temporalio.api.common.v1 import Payload
from temporalio.client import Client

MAX_PAYLOADS = 20_000  # decoded per execution read; the rest stay as Temporal holds them
MAX_DEPTH = 24  # nesting followed into an event (a failure's cause chain included)
# Search attributes are indexed by the server, never through a codec: left as they are.
SKIPPED = frozenset({"search_attributes", "indexed_fields"})
PAYLOAD = Payload.DESCRIPTOR.full_name


def payloads_in(message, found: list[Payload], depth: int = 0) -> None:
    """Every Payload inside `message` (repeated, in maps, nested), appended to `found` in event order."""
    if depth > MAX_DEPTH or len(found) >= MAX_PAYLOADS:
        return
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE or field.name in SKIPPED:
            continue
        entry = field.message_type
        if entry.GetOptions().map_entry:  # map<string, Payload> (a header, a memo) or of messages
            values = entry.fields_by_name["value"]
            if values.type == values.TYPE_MESSAGE:
                items = list(value.values())
                _each(items, values.message_type.full_name == PAYLOAD, found, depth)
            continue
        items = [value] if hasattr(value, "DESCRIPTOR") else list(value)  # one message, or a repeated field
        _each(items, entry.full_name == PAYLOAD, found, depth)


def _each(items: list, are_payloads: bool, found: list[Payload], depth: int) -> None:
    for item in items:
        if are_payloads:
            found.append(item)
        else:
            payloads_in(item, found, depth + 1)


async def decode_events(client: Client, events: list) -> None:
    """Each event's payloads decoded by the client's payload codec, in place; nothing without one."""
    codec = getattr(getattr(client, "data_converter", None), "payload_codec", None)  # a stand-in client: none
    if codec is None or not events:
        return
    found: list[Payload] = []
    for ev in events:
        payloads_in(ev, found)
    decoded = await codec.decode(found)
    for payload, plain in zip(found, decoded, strict=True):
        if plain is not payload:
            payload.CopyFrom(plain)
