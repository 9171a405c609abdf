"""The reports' one codec: a report is a tree of dataclasses (this package's modules), written to JSON
and read back by their annotations, so a field is declared once and both ways follow it.

Reading is strict about shapes and lenient about absence: a value of the wrong JSON type is a
`ReportError` naming where it is (`report.runs[3].audit.lost: expected a whole number, got a
string`), never a traceback; a field absent from the object takes its default (older reports lack
the fields added since, and a report built by hand names only what it needs), unless it has none.
A union of records reads as the first of them whose fields without a default are all present.

What a field may say of its JSON beyond its type (its key, `rest`, `omitted`, `flat`, `empty_none`,
`version`) is declared with fields.py's helpers."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:
    Json: TypeAlias = None | bool | int | float | str | list["Json"] | dict[str, "Json"]
else:  # what json.loads makes; the codec passes such a value through as it is
    Json = object
JsonObject: TypeAlias = dict[str, Json]

SCHEMA = 1  # the reports' schema number, written as "schema"; a report without one has the same shape
T = TypeVar("T")
Read = Callable[[object], object]


class ReportError(ValueError):
    """A report that does not read as its schema: where, and what was wrong."""


def loads(data: bytes | str, limit: int, what: str = "report") -> Json:
    """JSON of at most `limit` bytes; too long, not JSON or nested too deep is a ReportError."""
    if len(data) > limit:
        raise ReportError(f"{what}: {len(data)} bytes, more than the {limit} a report may have")
    try:
        value: Json = json.loads(data)
    except RecursionError:
        raise ReportError(f"{what}: nested too deep to be a report") from None
    except ValueError as err:  # UnicodeDecodeError too
        raise ReportError(f"{what}: not JSON ({str(err)[:200]})") from None
    return value


def decode(cls: type[T], value: object, path: str = "report") -> T:
    """`value` (what json.loads made) as the record type `cls`; a ReportError says where it does not fit."""
    return typing.cast(T, decode_union(cls, value, path))


def decode_union(hint: object, value: object, path: str = "report") -> object:
    """`value` as `hint`, a record type or a union of them (`A | B`: the caller narrows it)."""
    try:
        return _reader(hint)(value)
    except _Misfit as err:
        raise ReportError(f"{path}{''.join(reversed(err.where))}: {err.what}") from None


def encode(record: object) -> JsonObject:
    """The record's JSON object (json.dumps writes it as is)."""
    return _encode_record(record)


# Reading: one reader per annotation, made once. A reader that meets a value that does not fit raises
# _Misfit; each container it is in adds its key or index on the way out, so no path is built for a
# report that reads (most of a report's reading time would go to building them).


@dataclasses.dataclass(frozen=True)
class _Field:
    name: str
    key: str
    read: Read
    required: bool
    omit: bool = False
    rest: bool = False
    flat: tuple[type, ...] = ()  # the record types a flat field may be
    empty_none: bool = False
    version: int | None = None


@dataclasses.dataclass(frozen=True)
class _Plan:
    """How one record type reads: its fields, the keys they name, the keys it cannot do without; and,
    apart, the (name, key, reader) of each field read as it is, which is most of them."""

    fields: tuple[_Field, ...]
    known: frozenset[str]
    required: frozenset[str]
    plain: tuple[tuple[str, str, Read], ...]
    special: tuple[_Field, ...]


_PLANS: dict[type, _Plan] = {}
_READERS: dict[object, Read] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        fields = _fields(cls)
        known = {f.key for f in fields if not f.rest and not f.flat}
        known.update(k for f in fields for member in f.flat for k in _plan(member).known)
        required = frozenset(f.key for f in fields if f.required)
        special = tuple(f for f in fields if f.rest or f.flat or f.empty_none or f.version is not None)
        plain = tuple((f.name, f.key, f.read) for f in fields if f not in special)
        plan = _PLANS[cls] = _Plan(fields, frozenset(known), required, plain, special)
    return plan


def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        meta, hint = f.metadata, hints[f.name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if meta.get("rest"):
            out.append(_Field(f.name, f.name, _reader(typing.get_args(hint)[1]), False, rest=True))
        elif meta.get("flat"):
            members = tuple(m for m in typing.get_args(hint) if _is_record(m))
            out.append(_Field(f.name, f.name, _union_of_records(members, True), False, flat=members))
        else:
            current = f.default if meta.get("version") and isinstance(f.default, int) else None
            name, omit, empty = str(meta.get("key", f.name)), bool(meta.get("omit")), bool(meta.get("empty_none"))
            out.append(_Field(f.name, name, _reader(hint), required, omit, empty_none=empty, version=current))
    return tuple(out)


def _is_record(hint: object) -> typing.TypeGuard[type]:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _kind(value: object) -> str:
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    names |= {list: "a list", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


_ABSENT = object()


class _Misfit(Exception):
    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what, self.where = what, list[str]()


def _bad(wanted: str, value: object) -> _Misfit:
    return _Misfit(f"expected {wanted}, got {_kind(value)}")


def _read_record(cls: type, value: object) -> object:
    if type(value) is not dict:
        raise _bad("an object", value)
    plan = _PLANS.get(cls) or _plan(cls)
    kwargs: dict[str, object] = {}
    at = None  # the key being read: where a misfit inside it is
    try:
        for name, at, read in plan.plain:
            found = value.get(at, _ABSENT)
            if found is not _ABSENT:
                kwargs[name] = read(found)
            elif at in plan.required:
                at, missing = None, at
                raise _Misfit(f"missing '{missing}'")
        at = None
        for f in plan.special:
            if f.flat:
                kwargs[f.name] = f.read(value)
            elif f.rest:
                kwargs[f.name] = _read_rest(f.read, value, plan.known)
            elif f.key in value:
                at = f.key
                kwargs[f.name] = _read_field(f, value[f.key])
                at = None
    except _Misfit as err:
        if at is not None:
            err.where.append(f".{at}")
        raise
    return cls(**kwargs)


def _read_rest(read: Read, value: dict[str, object], known: frozenset[str]) -> dict[str, object]:
    out = {}
    for k, v in value.items():
        if k not in known:
            try:
                out[k] = read(v)
            except _Misfit as err:
                err.where.append(f".{k}")
                raise
    return out


def _read_field(f: _Field, value: object) -> object:
    if f.empty_none and value == {}:
        return None
    read = f.read(value)
    if f.version is not None and isinstance(read, int) and not 1 <= read <= f.version:
        newer = "a newer checkpoint-tui wrote it" if read > f.version else "not a schema number"
        raise _Misfit(f"schema {read}: this checkpoint-tui reads 1 to {f.version} ({newer})")
    return read


def _record_reader(cls: type) -> Read:
    return lambda value: _read_record(cls, value)


def _union_of_records(members: tuple[type, ...], none_ok: bool) -> Read:
    """The first record type whose required keys the object has (None for a flat field none fits)."""

    def read(value: object) -> object:
        if type(value) is not dict:
            raise _bad("an object", value)
        for member in members:
            if _plan(member).required <= value.keys():
                return _read_record(member, value)
        if none_ok:
            return None
        names = " or ".join(f"{m.__name__} ({', '.join(sorted(_plan(m).required))})" for m in members)
        raise _Misfit(f"has the keys of none of {names}")

    return read


def _scalar(kind: type) -> Read:
    wanted = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}[kind]

    def read(value: object) -> object:
        if type(value) is kind:
            return value
        if kind is float and type(value) is int:  # JSON writes 2.0 as 2.0, a hand-written report 2
            return float(value)
        raise _bad(wanted, value)

    return read


def _any(value: object) -> object:
    return value


def _none(value: object) -> object:
    if value is not None:
        raise _bad("null", value)
    return None


def _reader(hint: object) -> Read:
    """The reader of one annotation (made once): a scalar, None, object or Any (any JSON), a list,
    tuple or dict of those, a record, or a union of them."""
    found = _READERS.get(hint)
    if found is None:
        found = _READERS[hint] = _make_reader(hint)
    return found


def _make_reader(hint: object) -> Read:
    if hint is object or hint is Any:  # any JSON value (what json.loads made), kept as it is
        return _any
    if hint is type(None):
        return _none
    if _is_record(hint):
        return _record_reader(hint)
    if isinstance(hint, type) and hint in (bool, int, float, str):
        return _scalar(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list or origin is tuple:
        return _sequence(_reader(args[0]), origin)
    if origin is dict:
        return _mapping(_reader(args[1]))
    if origin is types.UnionType or origin is typing.Union:
        return _union(args)
    raise TypeError(f"the report codec reads no {hint!r}")


def _sequence(item: Read, made: type) -> Read:
    def read(value: object) -> object:
        if type(value) is not list and type(value) is not tuple:
            raise _bad("a list", value)
        try:
            items = [item(v) for v in value]
        except _Misfit:  # again one by one, to say which (a report that reads never comes here)
            for i, v in enumerate(value):
                try:
                    item(v)
                except _Misfit as err:
                    err.where.append(f"[{i}]")
                    raise err from None
            raise
        return items if made is list else tuple(items)

    return read


def _mapping(item: Read) -> Read:
    def read(value: object) -> object:
        if type(value) is not dict:
            raise _bad("an object", value)
        try:
            return {k: item(v) for k, v in value.items()}
        except _Misfit:
            for k, v in value.items():
                try:
                    item(v)
                except _Misfit as err:
                    err.where.append(f".{k}")
                    raise err from None
            raise

    return read


def _union(args: tuple[object, ...]) -> Read:
    """None if null is allowed; records as `_union_of_records`; else the member of the value's own
    JSON type (a whole number stays one where the union has int, else becomes a float)."""
    none_ok = type(None) in args
    members = [a for a in args if a is not type(None)]
    records = tuple(m for m in members if _is_record(m))
    if len(members) == 1 or (records and len(records) == len(members)):
        one = _reader(members[0]) if len(members) == 1 else _union_of_records(records, False)
        return (lambda value: None if value is None else one(value)) if none_ok else one
    scalars = {m: _reader(m) for m in members}

    def read(value: object) -> object:
        if value is None and none_ok:
            return None
        exact = scalars.get(type(value)) or (scalars.get(float) if type(value) is int else None)
        if exact is None:
            names = " or ".join(getattr(m, "__name__", str(m)) for m in members)
            raise _bad(names + (" or null" if none_ok else ""), value)
        return exact(value)

    return read


# Writing: the fields in their declared order, each as json.dumps takes it.

_SCALARS = frozenset({str, int, float, bool, type(None)})


def _encode_record(record: object) -> JsonObject:
    out: JsonObject = {}
    for f in (_PLANS.get(type(record)) or _plan(type(record))).fields:
        value = getattr(record, f.name)
        if f.rest:
            out.update({k: _encode(v) for k, v in value.items()})
        elif f.flat:
            out.update(_encode_record(value) if value is not None else {})
        elif value is None:
            if not f.omit:
                out[f.key] = {} if f.empty_none else None
        else:
            out[f.key] = value if type(value) in _SCALARS else _encode(value)
    return out


def _encode(value: object) -> Json:
    kind = type(value)
    if kind in _SCALARS:
        return typing.cast(Json, value)
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _encode(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _encode_record(value)
    raise TypeError(f"a report holds no {kind.__name__}")
