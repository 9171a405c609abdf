"""One call per key at a time in this process, and no call on a key from inside the call that holds it:
the guard that makes live callers on one key safe.

The ledger's claim is not a lease: a second live caller that finds the claim unstamped cannot tell a
writer that died from one that is still writing, so it takes the `recovered` path and writes too. In
one process the library knows better: every call on a key (sync threads and async tasks alike) waits
here until the call before it on that key has stamped (or failed), and then claims, finds the effect
stamped, and is `skipped`. Nothing here is durable: a killed worker leaves no turn held, so recovery
after a kill is untouched. Callers in unrelated processes are not serialised (see the package doc).

The call that has its turn holds the key (a `Hold`) until it ends. A call that is part of that call
would wait for itself, so it is refused: one made in the holder's context (its write, a task or
`asyncio.to_thread` started from it), one in a process forked inside the write (the fork copies the
forking thread's context: every thread of the child is refused), and one from a thread the holder
waits for (joins, or waits for the result of the pool job it runs: found while waiting, `_waits_for`).
A process forked beside a running call (from another thread) waits for that call to end, then
claims: a hold's mark is in memory shared with forked children, so they see it end, and a holder
that died is no longer their ancestor (they claim, and recover what it left). Other waits are bounded
by the caller (`once.TURN_WAIT_S`).

A turn is a `concurrent.futures.Future` completed when it is the caller's turn. The caller exits in a
`finally`, whether it got its turn and is done, or stopped waiting (cancelled, interrupted): a turn
that came is passed on, one that did not is withdrawn.
"""

from __future__ import annotations

import contextvars
import mmap
import os
import sys
import threading
from collections import deque
from collections.abc import Hashable, Iterable
from concurrent.futures import Future
from concurrent.futures import thread as pool_threads


class Hold:
    """One call's hold on a key, from its turn to its end. Its mark sits in a slot of memory shared
    with the processes forked meanwhile, so they see the hold end."""

    def __init__(self, key: Hashable, slots: memoryview, slot: int, mark: int) -> None:
        self.key, self.pid = key, os.getpid()
        self.threads = {threading.get_ident()}  # the caller's and its write's: what a waiter may be waited for by
        self._slots, self._slot, self._mark = slots, slot, mark

    def marked(self) -> bool:
        return self._slots[self._slot] == self._mark

    def active(self) -> bool:
        """Still held: the mark is there and its holder alive (in a forked child: still our ancestor)."""
        return self.marked() and (self.pid == os.getpid() or _is_ancestor(self.pid))


# The holds of the calls the current context is part of: a call's write runs in its context (awaited,
# or on a thread in a copy of it), so a call from inside the write on the same key is refused.
HELD: contextvars.ContextVar[tuple[Hold, ...]] = contextvars.ContextVar("checkpoint_effects_held", default=())


class _Marks:
    """Slots of anonymous shared memory (MAP_SHARED: a forked child sees the parent's writes), one per
    running hold: its mark (a number unique in this process) until the hold ends, then 0."""

    SLOTS = 4096  # 8 bytes each; another region when they are all taken

    def __init__(self) -> None:
        self._free: list[tuple[memoryview, int]] = []
        self._region: memoryview | None = None
        self._next = 0
        self._last = 0

    def take(self) -> tuple[memoryview, int, int]:
        if self._free:
            region, slot = self._free.pop()
        else:
            if self._region is None or self._next == self.SLOTS:
                self._region, self._next = memoryview(mmap.mmap(-1, 8 * self.SLOTS)).cast("Q"), 0
            region, slot = self._region, self._next
            self._next += 1
        self._last += 1
        region[slot] = self._last
        return region, slot, self._last

    def give_back(self, hold: Hold) -> None:
        hold._slots[hold._slot] = 0
        self._free.append((hold._slots, hold._slot))


class KeyGate:
    def __init__(self) -> None:
        self._reset()
        self._inside: dict[Hashable, Hold] = {}  # held by a call this process was forked inside
        self._beside: dict[Hashable, Hold] = {}  # held by a call of an ancestor at our fork

    def _reset(self) -> None:
        """A fresh state (also in a forked child: a lock held by a thread the child does not have
        would never be released there, and the parent's turns are not the child's)."""
        self._mutex = threading.Lock()
        self._turns: dict[Hashable, deque[Future[None]]] = {}  # a key present = held; its waiters in order
        self._holds: dict[Hashable, Hold] = {}  # the running hold of a key, once its caller has its turn
        self._marks = _Marks()

    def enter(self, key: Hashable) -> Future[None]:
        """Queue for `key`; the future completes when it is this caller's turn (at once if free)."""
        turn: Future[None] = Future()
        with self._mutex:
            waiting = self._turns.get(key)
            if waiting is None:
                self._turns[key] = deque()
                turn.set_running_or_notify_cancel()
                turn.set_result(None)
            else:
                waiting.append(turn)
        return turn

    def exit(self, key: Hashable, turn: Future[None]) -> None:
        """The caller is done, or stops waiting: if its turn came, pass it on; else withdraw it (a
        pending future cancels; one that completed meanwhile is the caller's turn, passed on)."""
        if not turn.cancel():
            self._pass_on(key)

    def _pass_on(self, key: Hashable) -> None:
        """The next live waiter gets the turn, or the key is free (in a process forked while the turn was
        held, the call that goes on in the forking thread finds no turns of its parent's: nothing)."""
        with self._mutex:
            waiting = self._turns.get(key)
            if waiting is None:
                return
            while waiting:
                turn = waiting.popleft()
                if turn.set_running_or_notify_cancel():  # False: that waiter gave up (cancelled)
                    turn.set_result(None)
                    return
            del self._turns[key]

    def hold(self, key: Hashable) -> Hold:
        """The caller has its turn on `key`: its hold, until `release`."""
        with self._mutex:
            hold = Hold(key, *self._marks.take())
            self._holds[key] = hold
        return hold

    def release(self, hold: Hold) -> None:
        """The hold's call has ended. In a process forked inside it, the parent's hold stays marked: only
        the parent ends it (and its slot is the parent's to reuse)."""
        if hold.pid != os.getpid():
            return
        with self._mutex:
            if self._holds.get(hold.key) is hold:
                del self._holds[hold.key]
            self._marks.give_back(hold)

    def inside(self, key: Hashable) -> Hold | None:
        """The running hold on `key` of a call the caller is part of: one in its context, or the one
        this process was forked inside."""
        for hold in (*HELD.get(), self._inside.get(key)):
            if hold is not None and hold.key == key and hold.active():
                return hold
        return None

    def beside(self, key: Hashable) -> Hold | None:
        """The running hold on `key` of an ancestor's call that was writing when this process was forked
        from another of its threads."""
        hold = self._beside.get(key)
        return hold if hold is not None and hold.active() else None

    def holder_waits_for_me(self, key: Hashable) -> bool:
        """Whether the call holding `key` waits, through threads it joins or pool jobs whose results it
        waits for, for the calling thread (which waits for its turn on `key`: neither would move)."""
        hold = self._holds.get(key)
        return hold is not None and _waits_for(tuple(hold.threads), threading.get_ident())

    def _forked(self) -> None:
        """In a forked child, on the forking thread (its only one): the holds of its context become the
        whole process's (it was forked inside those calls), the parent's others are waited for."""
        mine = {hold.key: hold for hold in HELD.get()}
        inside = {**self._inside, **mine}
        beside = {**self._beside, **{key: hold for key, hold in self._holds.items() if key not in mine}}
        self._reset()
        self._inside = {key: hold for key, hold in inside.items() if hold.marked()}
        self._beside = {key: hold for key, hold in beside.items() if hold.marked()}


def _is_ancestor(pid: int) -> bool:
    """Whether `pid` is an ancestor of this process, hence alive: a dead one's children are adopted by
    another, and a pid reused later is never an ancestor of a process older than its new owner."""
    if pid == os.getppid():
        return True
    import psutil

    try:
        return any(parent.pid == pid for parent in psutil.Process().parents())
    except psutil.Error:
        return True  # cannot tell: as if alive (the wait is bounded)


# The waits `_waits_for` reads from stacks. A pool job is a private class of the standard library:
# if it is renamed, a wait for a job's result is no longer seen (the waiter's deadline still ends it;
# tests/test_effects_reentry.py's pool-job test says so).
_JOIN = threading.Thread.join.__code__
_RESULT = (Future.result.__code__, Future.exception.__code__)
_JOB = getattr(getattr(getattr(pool_threads, "_WorkItem", None), "run", None), "__code__", None)


def _waits_for(holders: Iterable[int], me: int) -> bool:
    """Whether a thread of `holders` is blocked, directly or through other threads, on thread `me`:
    joining it, or waiting for the result of a pool job it runs. Read from the threads' stacks."""
    frames = sys._current_frames()
    jobs: dict[int, int] = {}  # id of a pool job's future -> the thread running it
    for ident, frame in frames.items():
        for f in _stack(frame):
            if f.f_code is _JOB:
                jobs[id(getattr(f.f_locals.get("self"), "future", None))] = ident
    seen: set[int] = set()
    todo = list(holders)
    while todo:
        ident = todo.pop()
        if ident == me:
            return True
        if ident in seen or ident not in frames:
            continue
        seen.add(ident)
        for f in _stack(frames[ident]):  # innermost first: the wait it is blocked in
            if f.f_code is _JOIN:
                todo.append(getattr(f.f_locals.get("self"), "ident", None) or 0)
                break
            if any(f.f_code is code for code in _RESULT):
                todo.append(jobs.get(id(f.f_locals.get("self")), 0))
                break
    return False


def _stack(frame):  # noqa: ANN001, ANN202 - a frame and its callers
    while frame is not None:
        yield frame
        frame = frame.f_back


GATE = KeyGate()
os.register_at_fork(after_in_child=GATE._forked)
