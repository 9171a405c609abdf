"""One call per key at a time in this process: the guard that makes concurrent live callers safe.

The ledger's claim is not a lease: a second live caller that finds the claim unstamped cannot tell a
writer that died from one that is still writing, so it takes the `recovered` path and writes too. In
one process the library knows better: every call on a key (sync threads and async tasks alike) waits
here until the call before it on that key has stamped (or failed), and then claims, finds the effect
stamped, and is `skipped`. Nothing here is durable: a killed worker leaves no turn held, so recovery
after a kill is untouched. Callers in different processes are not serialised (see the package doc).

A turn is a `concurrent.futures.Future` completed when it is the caller's turn. The caller exits in a
`finally`, whether it got its turn and is done, or stopped waiting (cancelled, interrupted): a turn
that came is passed on, one that did not is withdrawn.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Hashable
from concurrent.futures import Future


class KeyGate:
    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        """A fresh state (also in a forked child: a lock held by a thread the child does not have
        would never be released there, and the parent's turns are not the child's)."""
        self._mutex = threading.Lock()
        self._turns: dict[Hashable, deque[Future[None]]] = {}  # a key present = held; its waiters in order

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
        """The next live waiter gets the turn, or the key is free."""
        with self._mutex:
            waiting = self._turns[key]
            while waiting:
                turn = waiting.popleft()
                if turn.set_running_or_notify_cancel():  # False: that waiter gave up (cancelled)
                    turn.set_result(None)
                    return
            del self._turns[key]


GATE = KeyGate()
os.register_at_fork(after_in_child=GATE._reset)
