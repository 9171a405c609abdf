"""A toy agent framework, as a team outside checkpoint-tui would write one for its own integration:
the example worker's `send_line_unguarded` activities are its tool calls (`toy-send`), each call
identified by the line's index in its input. One module, the interface of checkpoint_tui/frameworks/base.py."""

from __future__ import annotations

from checkpoint_tui.frameworks.base import BY_TYPE, NO, PYTHON_HEARTBEAT_FIX
from checkpoint_tui.frameworks.units import ActivitySeen, UnitInfo, args_of, digest, field, other, type_of

NAME = "toy"
LANGUAGE = "python"
TOOL_TYPE = "send_line_unguarded"


def recognises(seen: ActivitySeen) -> int:
    return BY_TYPE if type_of(seen) == TOOL_TYPE else NO


def classify(seen: list[ActivitySeen]) -> list[UnitInfo]:
    return [_unit(s) for s in seen]


def heartbeat_fix(cls: str) -> str:
    return PYTHON_HEARTBEAT_FIX


def _unit(seen: ActivitySeen) -> UnitInfo:
    if type_of(seen) != TOOL_TYPE:
        return other(seen)
    first = (args_of(seen) or [None])[0]
    index = field(first, "index")
    call_id = f"line-{index}" if isinstance(index, int) and not isinstance(index, bool) else None
    label = "tool · toy-send" + (f" · call {call_id}" if call_id else "")
    return UnitInfo("tool", "toy-send", call_id, digest(first), None, None, label)
