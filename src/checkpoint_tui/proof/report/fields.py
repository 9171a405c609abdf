"""What a field of a report's record may say about its JSON beyond its type (codec.py reads it from the
field's metadata): its JSON key when that is not its name; `rest`, the object's keys no other field
names (a nemesis's own figures, a verify run's figures), written back in its place; `omitted`, left out
of the JSON when None (parts only some reports have); `flat`, a record whose keys sit in the parent
object itself; `empty_none`, None written and read as `{}`; `version`, the report's schema number."""

from __future__ import annotations

import dataclasses
from typing import Any


def key(name: str, default: object = dataclasses.MISSING) -> Any:
    """A field written under another JSON key (`class`, a Python keyword)."""
    return _field({"key": name}, default)


def rest(required: bool = False) -> Any:
    """The object's keys no other field of the record names, kept and written back in its place
    (`required`: no default, so the record's constructor takes it before the fields with one)."""
    if required:
        return dataclasses.field(metadata={"rest": True})
    return dataclasses.field(default_factory=dict, metadata={"rest": True})


def omitted(default: object = None) -> Any:
    """Left out of the JSON when None: a part only some reports have."""
    return _field({"omit": True}, default)


def flat() -> Any:
    """A record (or None) whose keys sit in the parent's object, not under a key of their own."""
    return dataclasses.field(default=None, metadata={"flat": True})


def empty_none() -> Any:
    """None, written and read as `{}` (a skipped experiment's report)."""
    return dataclasses.field(default=None, metadata={"empty_none": True})


def version(current: int) -> Any:
    """The schema number: absent in a report written before it had one (the same shape), else a whole
    number from 1 to `current`."""
    return dataclasses.field(default=current, metadata={"version": True})


def _field(metadata: dict[str, object], default: object) -> Any:
    if isinstance(default, list | dict):
        made = type(default)
        return dataclasses.field(default_factory=made, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)
