"""How the audit names an activity in its sentences and lines: a tool by its name and call id, else
its type and id."""

from __future__ import annotations


def name(r: dict) -> str:
    if r.get("tool"):
        return f"{r['tool']} call {str(r['call_id'])[:48]}" if r.get("call_id") else str(r["tool"])
    return f"{r['type']} activity {r['activity_id']}"


def act(r: dict) -> str:
    failure = f" (before: {r['last_failure'][:80]})" if r.get("last_failure") else ""
    what = r.get("label") or r["type"]
    return f"#{r['seq']} {what} activity {r['activity_id']} attempt {r['attempt']} on {r['identity']}{failure}"


def names(entries: list[dict]) -> str:
    """The at-risk units by name (a tool's name and its call id, else the activity type and its id),
    each once, in order."""
    names = list(dict.fromkeys(name(r) for r in entries))
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
