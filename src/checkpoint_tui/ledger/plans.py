"""Ledger work written once, run by a blocking connection or an asyncio one.

A plan is a generator that yields what it needs done and receives the answer: a `Stmt` for the
ledger (answered with its cursor), or any other request its driver knows. `drive` answers on the
calling thread; `drive_async` awaits answers that are awaitable. So the SQL and the decisions on its
results exist once, and the worker's activities can run them on PostgreSQL without holding their
event loop for a round trip (`loop_worker/activity_ledger.py`), while the app, the CLI and the tests keep
calling the plain functions.

A function with a plan says so with `@runs(plan)`: `fn(conn, *args)` and `plan(*args)` then do the
same thing, `fn` through `conn` (and on SQLite, where a plan is not always one statement, `fn` may
keep a transaction of its own: plans are used only where `conn.writes_in_with`, i.e. PostgreSQL,
or where both engines run the same single statement).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")
Plan = Generator[Any, Any, T]


@dataclass(frozen=True)
class Stmt:
    sql: str
    params: Sequence[Any] = ()


def stmt(sql: str, params: Sequence[Any] = ()) -> Stmt:
    return Stmt(sql, tuple(params))


class PlanError(TypeError):
    """A plan asked its driver for something it does not answer (a bug in the plan, not the ledger)."""


def drive(plan: Plan[T], answer: Callable[[Any], Any]) -> T:
    """Run `plan` to its end, answering each request with `answer(request)`; an exception raised by
    `answer` is thrown into the plan (which may handle it), except a PlanError, which ends it."""
    with closing(plan):
        try:
            request = next(plan)
            while True:
                request = _resume(plan, *_answered(answer, request))
        except StopIteration as done:
            return done.value


async def drive_async(plan: Plan[T], answer: Callable[[Any], Any]) -> T:
    """`drive` for an `answer` that may return an awaitable (awaited before it is sent back)."""
    with closing(plan):
        try:
            request = next(plan)
            while True:
                reply, error = _answered(answer, request)
                if error is None and inspect.isawaitable(reply):
                    try:
                        reply = await reply
                    except Exception as err:
                        error = err
                request = _resume(plan, reply, error)
        except StopIteration as done:
            return done.value


def _answered(answer: Callable[[Any], Any], request: Any) -> tuple[Any, Exception | None]:
    try:
        return answer(request), None
    except PlanError:
        raise
    except Exception as err:
        return None, err


def _resume(plan: Plan[Any], reply: Any, error: Exception | None) -> Any:
    return plan.throw(error) if error is not None else plan.send(reply)


def on(conn: Any) -> Callable[[Any], Any]:
    """The blocking answer: a `Stmt` runs on `conn` (a `backend.Ledger`)."""

    def answer(request: Any) -> Any:
        if isinstance(request, Stmt):
            return conn.execute(request.sql, request.params)
        raise PlanError(f"a ledger plan asked for {type(request).__name__}, not a statement")

    return answer


def run(conn: Any, plan: Plan[T]) -> T:
    return drive(plan, on(conn))


F = TypeVar("F", bound=Callable[..., Any])


def runs(plan: Callable[..., Plan[Any]]) -> Callable[[F], F]:
    """Mark `fn(conn, *args, **kw)` as doing what `plan(*args, **kw)` does (`loop_worker/activity_ledger.py`
    runs the plan on PostgreSQL instead of calling `fn`)."""

    def mark(fn: F) -> F:
        fn.plan = plan  # type: ignore[attr-defined]
        return fn

    return mark
