"""What a write is, and what it returned: a write whose body would never run is refused (before the
claim when its type says so, else once it returned), and the sync twin takes no async write."""

from __future__ import annotations

import functools
import inspect

from checkpoint_tui.effects.identity import EffectRefused


def makes(fn: object) -> str | None:
    """What calling `fn` makes instead of running its body, when its type says so: 'coroutine' (an
    `async def`), 'generator' or 'async generator' (a generator function), also through a partial, a
    method, a staticmethod or an object's `__call__`. None for any other callable: what a plain one
    returns (a wrapper of an async def returns a coroutine too) is known only after the call."""
    for _ in range(16):  # partials of partials of ...: bounded
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif isinstance(fn, (staticmethod, classmethod)) or inspect.ismethod(fn):
            fn = fn.__func__
        elif inspect.iscoroutinefunction(fn):
            return "coroutine"
        elif inspect.isasyncgenfunction(fn):
            return "async generator"
        elif inspect.isgeneratorfunction(fn):
            return "generator"
        elif inspect.isroutine(fn) or isinstance(fn, type) or not callable(fn):
            return None
        else:
            fn = type(fn).__call__  # an object: what its class's __call__ makes
    return None


def refuse_unrunnable(write: object, sync: bool) -> None:
    """Refused before the claim: a sync write that is async, and a write whose body never runs."""
    made = makes(write)
    if made == "coroutine" and sync:
        raise EffectRefused(
            "exactly_once_sync takes a sync write, and calling this one makes a coroutine (an async "
            "def): await exactly_once(...) for it; refused before anything was claimed"
        )
    if made in ("generator", "async generator"):
        raise EffectRefused(
            f"write is a {made} function: calling it makes a {made} and its body never runs; make "
            "it a plain function; refused before anything was claimed"
        )


def unrun(result: object, sync: bool) -> str | None:
    """What a write returned instead of writing (closed here, so it never runs later), or None."""
    if inspect.isgenerator(result) or (sync and inspect.iscoroutine(result)):
        what = "generator" if inspect.isgenerator(result) else "coroutine"
        result.close()  # never started: nothing it holds runs, and no "never awaited" warning at exit
        return what
    if inspect.isasyncgen(result):  # never iterated: nothing to close
        return "async generator"
    if sync and inspect.isawaitable(result):
        return "awaitable"
    return None


def unrun_refusal(api: str, key: str, what: str) -> str:
    ran = (
        "not awaited here: whether it ran is unknown"
        if what == "awaitable"
        else ("closed here unrun: nothing it holds was run")
    )
    fix = "make write a plain function" if "generator" in what else "pass a sync write, or await exactly_once(...)"
    return (
        f"{api}'s write returned a {what}, {ran}; its claim on {key[:80]!r} is left unstamped as after a "
        f"write that raised, so the next call on this key is recovered and writes ({fix})"
    )
