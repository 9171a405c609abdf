"""The two drivers of the ledger's claim -> write -> stamp protocol (`ledger.effects.claim_effect` and
`stamp_effect`, the same two transactions the lab's own effects use): `exactly_once` for async
activities and `exactly_once_sync` for sync ones. Both check the whole call before claiming, take
their turn on the key in this process (`gate`), heartbeat while they work, count every physical
write in the probe log before calling it, run their SQL on the library's ledger thread and their
sync writes on threads of their own. Every wait for a turn is bounded (`TURN_WAIT_S`)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from temporalio import activity

from checkpoint_tui.effects.gate import GATE, HELD, Hold
from checkpoint_tui.effects.identity import (
    EffectRefused,
    Identity,
    check_kind,
    check_write,
    effect_key,
    effect_spec,
)
from checkpoint_tui.effects.location import LEDGER, checked_location
from checkpoint_tui.effects.probe import ProbeRecord, append_probe, probe_line
from checkpoint_tui.effects.writes import makes, refuse_unrunnable, unrun, unrun_refusal
from checkpoint_tui.ledger import store
from checkpoint_tui.ledger.effects import Claim, EffectSpec, claim_effect, refuse_attempt, stamp_effect
from checkpoint_tui.waiting import to_the_end

Outcome = Literal["applied", "skipped", "recovered"]
TURN_WAIT_S = 600.0  # the longest wait for the call ahead on a key; then TimeoutError (retryable)
POLL_S = 0.05  # how often a waiting caller looks whether it is waited for, or past its deadline
Write = Callable[[str], Any]  # write(payload): returns None, or an awaitable (async def)
T = TypeVar("T")
log = logging.getLogger("checkpoint_tui.effects")


async def exactly_once(*, kind: str, payload: str, write: Write, key: str | None = None) -> Outcome:
    """Call `write(payload)` so that its effect happens once per key; returns what this call did:
    'applied' (claimed, written, stamped), 'skipped' (already stamped: not written) or 'recovered'
    (claimed earlier by an attempt that never stamped: written again, then stamped). An async `write`
    is awaited, a sync one runs on a thread of the library's own; the activity heartbeats meanwhile.
    Calls on one key in this process take turns (see `gate`)."""
    call = _Call.prepare(kind, payload, write, key, sync=False)
    async with _beating():
        deadline = time.monotonic() + TURN_WAIT_S
        beside = GATE.beside(call.gate)
        if beside is not None:
            await asyncio.wrap_future(_in_thread(_outwait, call, beside, deadline))
        turn = GATE.enter(call.gate)
        try:
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                    await asyncio.wrap_future(turn)  # (not wait_for: on 3.11 it may swallow a cancellation)
            except TimeoutError:
                raise TimeoutError(call.waited()) from None
            with _holding(call) as hold:
                claim = await asyncio.wrap_future(LEDGER.submit(_claim, call.target, call.spec))
                if claim.must_write:
                    await asyncio.wrap_future(_in_thread(append_probe, call.probe, call.line))
                    await _write(call, hold, write, payload, claim)
                await _unabandoned(LEDGER.submit(_stamp, call.target, call.spec, claim))
        finally:
            GATE.exit(call.gate, turn)
    return cast(Outcome, claim.outcome)


def exactly_once_sync(*, kind: str, payload: str, write: Callable[[str], object], key: str | None = None) -> Outcome:
    """The twin for sync activities (and plain threads), same semantics: `write` runs in its own
    thread while this one heartbeats."""
    call = _Call.prepare(kind, payload, write, key, sync=True)
    beat = _Heartbeat.current()
    deadline = time.monotonic() + TURN_WAIT_S
    beside = GATE.beside(call.gate)
    if beside is not None:
        beat.wait(_in_thread(_outwait, call, beside, deadline))
    turn = GATE.enter(call.gate)
    try:
        beat.wait(turn, check=functools.partial(_still_waiting, call, deadline))
        with _holding(call) as hold:
            claim = beat.wait(LEDGER.submit(_claim, call.target, call.spec))
            if claim.must_write:
                beat.wait(_in_thread(_probe_then_write, call, hold, write, payload, claim))
            stamp = LEDGER.submit(_stamp, call.target, call.spec, claim)
            try:
                beat.wait(stamp)
            except BaseException:  # interrupted (a sync activity's cancellation): the stamp is made first
                stamp.exception()
                raise
    finally:
        GATE.exit(call.gate, turn)
    return cast(Outcome, claim.outcome)


def default_key(kind: str) -> str:
    """The key `exactly_once(kind=kind)` would use in the calling activity attempt (e.g. to hand the
    same value to a provider's idempotency-key header)."""
    return effect_key(check_kind(kind), Identity.current())


def close() -> None:
    """Close the library's ledger connection (a worker shutting down, a test switching ledgers)."""
    LEDGER.close()


# --- the pieces ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Call:
    """One call, checked whole before anything is claimed: a refusal after the claim would leave it
    unstamped, and a retryable one would make every retry `recovered` without ever writing."""

    spec: EffectSpec
    target: str | Path
    probe: Path
    line: bytes  # the probe record, built (and bounded) now
    unrun: bytes  # its retraction, for a write that returned instead of running
    gate: tuple[str, str]  # (ledger, key): the turn this call waits for

    @classmethod
    def prepare(cls, kind: object, payload: object, write: object, key: str | None, sync: bool) -> _Call:
        check_write(write)
        refuse_unrunnable(write, sync)
        ident = Identity.current()
        spec = effect_spec(kind, payload, key, ident)
        target, probe = checked_location()
        try:
            record = _probe_record(spec, ident)
            line, unrun = probe_line(record), probe_line(replace(record, unrun=True))
        except ValueError as err:  # bounded keys and cut fields: unreachable, but never after a claim
            raise EffectRefused(str(err)) from None
        call = cls(spec, target, probe, line, unrun, (str(target), spec.id))
        hold = GATE.inside(call.gate)
        if hold is not None:
            forked = f"in a process forked inside its own write (pid {hold.pid}, still in it)"
            raise EffectRefused(call.nested("inside its own write" if hold.pid == os.getpid() else forked))
        return call

    def nested(self, where: str) -> str:
        return (
            f"exactly_once on {self.spec.id[:80]!r} called {where}: it would wait for itself or write twice; "
            "use another kind or key for a nested effect"
        )

    def waited(self, pid: int | None = None) -> str:
        whose = "ahead of it in this process" if pid is None else f"in process {pid}, which this one was forked from"
        return (
            f"exactly_once on {self.spec.id[:80]!r}: waited {TURN_WAIT_S:g} s for the call on this key {whose}, "
            "which still holds it (a slow write, or one that waits for this call); retry later, or use "
            "another key for a nested effect"
        )


@contextmanager
def _holding(call: _Call) -> Iterator[Hold]:
    """This call's hold on its key, from its turn to its end: in its context (its write runs in it),
    and marked where a process forked meanwhile sees it."""
    hold = GATE.hold(call.gate)
    token = HELD.set((*HELD.get(), hold))
    try:
        yield hold
    finally:
        HELD.reset(token)
        GATE.release(hold)


def _still_waiting(call: _Call, deadline: float) -> None:
    """Looked at while a sync caller waits for its turn: the holder may be waiting for it."""
    if GATE.holder_waits_for_me(call.gate):
        raise EffectRefused(call.nested("from a thread its own write waits for"))
    if time.monotonic() >= deadline:
        raise TimeoutError(call.waited())


def _outwait(call: _Call, hold: Hold, deadline: float) -> None:
    """Wait for the call on this key that an ancestor was making (on another thread) when it forked."""
    while hold.active():
        if time.monotonic() >= deadline:
            raise TimeoutError(call.waited(hold.pid))
        time.sleep(POLL_S)


def _claim(target: str | Path, spec: EffectSpec) -> Claim:
    return claim_effect(store.connect(target), spec)


def _stamp(target: str | Path, spec: EffectSpec, claim: Claim) -> None:
    stamp_effect(store.connect(target), spec, claim)


def _refuse(target: str | Path, claim: Claim) -> None:
    refuse_attempt(store.connect(target), claim)


def _probe_record(spec: EffectSpec, ident: Identity) -> ProbeRecord:
    return ProbeRecord(
        key=spec.id,
        kind=spec.kind,
        workflow_id=ident.workflow_id,
        run_id=ident.run_id,
        activity_id=ident.activity_id,
        attempt=ident.attempt,
        pid=spec.worker_pid,
        t=time.time(),
    )


# --- the write ------------------------------------------------------------------------------------


async def _write(call: _Call, hold: Hold, write: Write, payload: str, claim: Claim) -> None:
    """An async write awaited here; a sync one on a thread of its own (not the loop's default executor:
    a worker's few threads, which hung writes would use up)."""
    if makes(write) == "coroutine":
        await write(payload)
        return
    result = await asyncio.wrap_future(_in_thread(_run_write, hold, write, payload))
    what = unrun(result, sync=False)
    if what is not None:
        await asyncio.wrap_future(_in_thread(_unrun, call, claim))
        raise EffectRefused(unrun_refusal("exactly_once", call.spec.id, what))
    if inspect.isawaitable(result):  # a plain callable that returned a coroutine
        await result


def _probe_then_write(call: _Call, hold: Hold, write: Callable[[str], object], payload: str, claim: Claim) -> None:
    append_probe(call.probe, call.line)
    what = unrun(_run_write(hold, write, payload), sync=True)
    if what is not None:
        _unrun(call, claim)
        raise EffectRefused(unrun_refusal("exactly_once_sync", call.spec.id, what))


def _unrun(call: _Call, claim: Claim) -> None:
    """A write that returned instead of running wrote nothing: its probe record retracted, its attempt
    `refused` (the claim stays unstamped: the next call with a write that writes is `recovered`)."""
    append_probe(call.probe, call.unrun)
    LEDGER.submit(_refuse, call.target, claim).result()


def _run_write(hold: Hold, write: Callable[[str], object], payload: str) -> object:
    """`write(payload)` on this thread, counted among the hold's while it runs (see `gate._waits_for`)."""
    me = threading.get_ident()
    hold.threads.add(me)
    try:
        return write(payload)
    finally:
        hold.threads.discard(me)


async def _unabandoned(future: Future[T]) -> T:
    """Wait for `future` to the end, even if this task is cancelled meanwhile (a heartbeat delivers
    Temporal's cancellation): the stamp after a completed write must not be dropped from the ledger
    thread's queue, or the effect, done, stays unstamped and a retry sends it again. The cancellation
    is raised once the future is done."""
    return await to_the_end(asyncio.wrap_future(future))


def _in_thread(fn: Callable[..., T], *args: Any) -> Future[T]:
    """Run `fn` on a new daemon thread (a hung write must not hold the worker's exit), in a copy of
    the caller's context (so `activity.info()` works inside the write)."""
    future: Future[T] = Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(context.run(fn, *args))
        except BaseException as exc:  # handed to the caller, who raises it
            future.set_exception(exc)

    threading.Thread(target=run, name="checkpoint-effects-write", daemon=True).start()
    return future


# --- heartbeats ------------------------------------------------------------------------------------


def _beat_every() -> float | None:
    """A quarter of the activity's heartbeat timeout (the SDK throttles to 80 % of it anyway); None
    outside an activity, in a local activity, or without a heartbeat timeout (nothing to keep alive)."""
    if not activity.in_activity():
        return None
    info = activity.info()
    if info.is_local or not info.heartbeat_timeout:
        return None
    return min(max(info.heartbeat_timeout.total_seconds() / 4, 0.05), 10.0)


def _heartbeat() -> None:
    try:
        activity.heartbeat()
    except Exception:  # a failed heartbeat must not crash the write; Temporal's timeout is the judge
        log.warning("heartbeat failed during an exactly_once write", exc_info=True)


@asynccontextmanager
async def _beating() -> AsyncIterator[None]:
    every = _beat_every()
    if every is None:
        yield
        return

    # A beat at once, unlike the lab's own activities (loop_worker/heartbeat.py): a user's activity that
    # never heartbeats itself may rely on these to outlive its heartbeat timeout across many calls.
    async def loop() -> None:
        while True:
            _heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()


class _Heartbeat:
    """For the sync twin: wait on a future from the activity's own thread (where `activity.heartbeat()`
    works), beating every `every` seconds until it is done."""

    def __init__(self, every: float | None) -> None:
        self.every = every

    @classmethod
    def current(cls) -> _Heartbeat:
        return cls(_beat_every())

    def wait(self, future: Future[T], check: Callable[[], None] | None = None) -> T:
        """`future`'s result; `check()` is called every POLL_S meanwhile (it raises to stop waiting)."""
        if self.every is None and check is None:
            return future.result()
        if self.every is not None:
            _heartbeat()  # at once, as _beating says why
        step = min(s for s in (self.every, POLL_S if check else None) if s is not None)
        beat_at = time.monotonic() + (self.every or 0)
        while True:
            try:
                return future.result(timeout=step)
            except TimeoutError:
                if future.done():  # its own TimeoutError (a write that timed out), or done just now
                    return future.result()
            if check is not None:
                check()
            if self.every is not None and time.monotonic() >= beat_at:
                _heartbeat()
                beat_at = time.monotonic() + self.every
