"""What the frameworks' modules share about tool calls: a call as the model made it, the call that
`guarded_activity_as_tool` hands a tool's activity first (each names its id field its own way), the
digest of a call's JSON arguments, tool activities matched to the calls a model request made, and the
check that a guarded activity takes that call first."""

from __future__ import annotations

import inspect
import json
import typing
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from checkpoint_tui.frameworks.units import args_of, call_id_of, clean, digest, field

ARGUMENTS_LIMIT = 256 * 1024  # characters of a call's arguments decoded for the digest


@dataclass(frozen=True)
class Call:
    call_id: str
    name: str | None
    arguments: object  # the model's arguments as found: a JSON string, or a decoded value


def handed(seen: object, id_field: str) -> Call | None:
    """The call `guarded_activity_as_tool` hands its activity first: `{id_field, "tool_name"}`."""
    first = (args_of(seen) or [None])[0]
    if not isinstance(first, dict) or set(first) != {id_field, "tool_name"}:
        return None
    call_id = call_id_of(first[id_field])
    return Call(call_id, clean(first["tool_name"], 256), None) if call_id else None


def json_digest(arguments: str) -> str | None:
    """The digest of a call's JSON arguments, of the decoded value: the same arguments written with
    other spacing or key order give the same digest; None for what is not JSON or too big."""
    if len(arguments) > ARGUMENTS_LIMIT:
        return None
    try:
        return digest(json.loads(arguments))
    except (ValueError, RecursionError):  # not JSON, too deep, an integer of > 4300 digits
        return None


def tool_call_parameter(fn: Callable[..., Any], name: str, tool_call: type) -> list[inspect.Parameter]:
    """`fn`'s parameters after any `self`, the first of which must be annotated `tool_call` (the call
    the model never sees); raises TypeError naming the activity otherwise."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    if not params:
        raise TypeError(f"{name}: the first parameter must take the ToolCall")
    if typing.get_type_hints(fn, include_extras=True).get(params[0].name) is not tool_call:
        raise TypeError(f"{name}: the first parameter ({params[0].name}) must be annotated ToolCall")
    return params


def activity_name(fn: Callable[..., Any]) -> str:
    """The name of the Temporal activity `fn` defines (`@activity.defn`); TypeError for anything else."""
    from temporalio import activity

    defn = activity._Definition.from_callable(fn)  # the SDK's own reading of the decorator
    if defn is None or not defn.name:
        raise TypeError("guarded_activity_as_tool takes a named Temporal activity (@activity.defn)")
    return defn.name


def match_calls(kinds: list[str], calls: list[Call], even_only: bool = False) -> list[Call | None]:
    """Tool activities (their types) to the calls a model request made: first each to the next unused
    call of its own name (the OpenAI Agents SDK's activity_as_tool names the tool after the activity; an
    AI SDK tool often shares its activity's name), then the rest to the unused calls in order; with
    `even_only`, in order only when as many activities as calls are left (else a tool that made no
    activity, or an activity that is no tool's, would shift every id after it: they get none)."""
    by_name: dict[str | None, deque[int]] = {}
    for j, call in enumerate(calls):
        by_name.setdefault(call.name, deque()).append(j)
    matched: list[Call | None] = [None] * len(kinds)
    used: set[int] = set()
    for i, kind in enumerate(kinds):
        same = by_name.get(kind)
        if same:
            j = same.popleft()
            matched[i] = calls[j]
            used.add(j)
    left = [j for j in range(len(calls)) if j not in used]
    if even_only and len(left) != matched.count(None):
        return matched
    rest = iter(left)
    for i in range(len(kinds)):
        if matched[i] is None:
            k = next(rest, None)
            if k is None:
                break
            matched[i] = calls[k]
    return matched


def calls_in(items: object, kind: str, keys: tuple[str, str, str], limit: int) -> list[Call]:
    """The items of type `kind` in a list a model request or its result holds, as calls, in order, each
    call id once; `keys` names their (call id, tool name, arguments) fields. At most `limit` items are
    looked at: the list is anyone's."""
    if not isinstance(items, list):
        return []
    id_key, name_key, args_key = keys
    found: list[Call] = []
    ids: set[str] = set()
    for item in items[:limit]:
        if field(item, "type") != kind:
            continue
        call_id = call_id_of(field(item, id_key))
        if call_id is not None and call_id not in ids:
            ids.add(call_id)
            found.append(Call(call_id, clean(field(item, name_key), 256), field(item, args_key)))
    return found
