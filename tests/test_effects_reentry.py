"""A call on a key from work its own write started, in this process or in a fork of it (issue 39,
findings 1 and 2), and a write that returns something to await or iterate instead of writing
(finding 3). A call inside the write is refused, not recovered (a second physical write) nor left
waiting for itself; a forked child of a process whose call on the key is still running waits for
that call instead of recovering it; every wait for a turn is bounded."""

from __future__ import annotations

import asyncio
import functools
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from checkpoint_tui.effects import EffectRefused, exactly_once_sync
from test_effects_library import Lab, call, lab  # noqa: F401 - `lab` is the two-backend fixture


def _attempt(key: str) -> str:
    """A call on `key` from some other thread: its outcome, or the error it raised."""
    try:
        return exactly_once_sync(kind="email", payload="inner", write=lambda p: None, key=key)
    except Exception as err:  # noqa: BLE001 - what it raised is the result
        return f"{type(err).__name__}: {err}"


# --- finding 2: a thread started by the write -------------------------------------------------------


def _in_thread(key: str, out: list[str]) -> threading.Thread:
    thread = threading.Thread(target=lambda: out.append(_attempt(key)))
    thread.start()
    return thread


def _in_grandchild(key: str, out: list[str]) -> threading.Thread:
    def start() -> None:
        _in_thread(key, out).join(5)

    thread = threading.Thread(target=start)
    thread.start()
    return thread


def _in_new_pool(key: str, out: list[str]) -> threading.Thread:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(_attempt, key)
    future.add_done_callback(lambda f: out.append(f.result()))
    pool.shutdown(wait=False)
    return pool._threads.copy().pop()  # its one worker, started from inside the write


@pytest.mark.parametrize("api", ["async", "sync"])
@pytest.mark.parametrize("start", [_in_thread, _in_grandchild, _in_new_pool], ids=["thread", "grandchild", "pool"])
async def test_a_thread_the_write_starts_and_joins_is_refused_not_hung(lab: Lab, api: str, start) -> None:  # noqa: F811
    """Today the thread waits for the turn its own write holds, and the write waits for the thread."""
    key = f"k-thread-{api}-{start.__name__}"
    inner: list[str] = []
    alive: list[bool] = []

    def write(payload: str) -> None:
        thread = start(key, inner)
        thread.join(5)
        alive.append(thread.is_alive())

    assert await call(api, kind="email", payload="p", write=write, key=key) == "applied"
    assert alive == [False], "the thread still waited for its turn"
    assert len(inner) == 1 and inner[0].startswith("EffectRefused") and "its own write" in inner[0], inner
    assert lab.outcomes(key) == ["applied"] and lab.writes() == {key: 1}
    from checkpoint_tui.effects.gate import GATE

    assert not GATE._turns  # nothing left held


async def test_a_thread_of_the_write_may_use_the_key_once_the_call_is_over(lab: Lab) -> None:  # noqa: F811
    """A thread the write started that calls after the call has stamped is not re-entering: skipped."""
    later: list[str] = []
    go = threading.Event()

    def write(payload: str) -> None:
        def run() -> None:
            go.wait(10)
            later.append(_attempt("k-later"))

        threading.Thread(target=run).start()

    assert exactly_once_sync(kind="email", payload="p", write=write, key="k-later") == "applied"
    go.set()
    deadline = time.monotonic() + 10
    while not later and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert later == ["skipped"]


@pytest.fixture
def old_pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as pool:
        pool.submit(lambda: None).result()  # its thread exists before any call
        yield pool


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_a_pool_job_whose_result_the_write_waits_for_is_refused(
    lab: Lab,  # noqa: F811 - the fixture's name
    api: str,
    old_pool: ThreadPoolExecutor,  # noqa: F811
) -> None:
    """The job runs on a thread the write did not start; the write waits for its result."""
    key = f"k-old-pool-{api}"
    inner: list[str] = []

    def write(payload: str) -> None:
        try:
            inner.append(old_pool.submit(_attempt, key).result(timeout=5))
        except TimeoutError:
            inner.append("the write gave up waiting")

    assert await call(api, kind="email", payload="p", write=write, key=key) == "applied"
    assert len(inner) == 1 and inner[0].startswith("EffectRefused") and "waits for" in inner[0], inner
    assert lab.outcomes(key) == ["applied"] and lab.writes() == {key: 1}


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_a_wait_for_a_turn_is_bounded(lab: Lab, api: str, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A wait the library cannot see (the write waits on an Event its thread's call would set): the
    call ends in a TimeoutError (retryable: the call ahead may only be slow) instead of hanging both."""
    from checkpoint_tui.effects import once

    monkeypatch.setattr(once, "TURN_WAIT_S", 0.5, raising=False)
    key = f"k-bound-{api}"
    inner: list[str] = []
    done = threading.Event()

    def write(payload: str) -> None:
        begun = time.monotonic()
        threading.Thread(target=lambda: (inner.append(_attempt(key)), done.set())).start()
        done.wait(10)
        inner.append(f"{time.monotonic() - begun:.1f}")

    assert await call(api, kind="email", payload="p", write=write, key=key) == "applied"
    assert inner[0].startswith("TimeoutError") and key in inner[0] and "waited 0.5 s" in inner[0], inner
    assert float(inner[1]) < 5
    assert lab.outcomes(key) == ["applied"] and lab.writes() == {key: 1}


def test_a_write_that_raises_timeout_error_fails_the_heartbeating_call(
    lab: Lab,  # noqa: F811 - the fixture's name
    monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """A sync write's own TimeoutError (socket.timeout is one) was taken for the heartbeat interval
    passing: the sync twin, heartbeating inside an activity, waited on its done future forever."""
    from checkpoint_tui.effects import once

    beats: list[float] = []
    monkeypatch.setattr(once, "_beat_every", lambda: 0.05)  # as in an activity with a heartbeat timeout
    monkeypatch.setattr(once, "_heartbeat", lambda: beats.append(time.monotonic()))

    def write(payload: str) -> None:
        raise TimeoutError("smtp timed out")

    out: list[BaseException] = []

    def run() -> None:
        try:
            exactly_once_sync(kind="email", payload="p", write=write, key="k-timeout")
        except BaseException as err:  # noqa: BLE001 - what it raised is the result
            out.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), f"still waiting after {len(beats)} heartbeats"
    assert len(out) == 1 and isinstance(out[0], TimeoutError) and "smtp" in str(out[0])
    assert lab.outcomes("k-timeout") == ["interrupted"]


# --- finding 1: a forked child ----------------------------------------------------------------------

PRELUDE = """
import os, signal, sys, threading, time
from checkpoint_tui.effects import exactly_once_sync
def attempt(key):
    try:
        return exactly_once_sync(kind="email", payload="child", write=lambda p: None, key=key)
    except Exception as err:
        return f"{type(err).__name__}: {err}"
def say(text):  # unbuffered: a forked child must not flush the parent's copy of stdout's buffer
    os.write(1, (text + "\\n").encode())
def in_new_thread(key):
    out = []
    thread = threading.Thread(target=lambda: out.append(attempt(key)))
    thread.start()
    thread.join()
    return out[0]
"""

FORK_IN_WRITE = (
    PRELUDE
    + """
def write(payload):
    pid = os.fork()
    if pid == 0:
        signal.alarm(20)
        say("child: " + in_new_thread("k-fork-write"))
        say("child-main: " + attempt("k-fork-write"))  # the forking thread itself
        os._exit(0)
    deadline = time.monotonic() + 20
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)
say("parent: " + exactly_once_sync(kind="email", payload="parent", write=write, key="k-fork-write"))
"""
)


def _run(script: str, timeout: float = 60) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout, env=os.environ
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_a_child_forked_by_the_write_is_refused_on_its_key(lab: Lab) -> None:  # noqa: F811
    """The write forks; the child calls on the same key from a new thread (today: `recovered`, a second
    physical write while the parent's is still running) and from the forking thread."""
    lines = _run(FORK_IN_WRITE)
    child = next(line for line in lines if line.startswith("child: "))
    assert "EffectRefused" in child and "its own write" in child, lines
    assert any(line.startswith("child-main: EffectRefused") for line in lines), lines
    assert "parent: applied" in lines
    assert lab.outcomes("k-fork-write") == ["applied"] and lab.writes() == {"k-fork-write": 1}


FORK_BESIDE = (
    PRELUDE
    + """
import select
writing, release = threading.Event(), threading.Event()
def write(payload):
    writing.set()
    release.wait(30)
holder = threading.Thread(target=lambda: say("holder: " + exactly_once_sync(
    kind="email", payload="parent", write=write, key="k-fork-beside")))
holder.start()
writing.wait(10)
r, w = os.pipe()
pid = os.fork()  # from the main thread, while the holder thread's call writes
if pid == 0:
    signal.alarm(20)
    os.close(r)
    os.write(w, b"calling\\n")
    result = in_new_thread("k-fork-beside")
    os.write(w, (result + "\\n").encode())
    os._exit(0)
os.close(w)
reader = os.fdopen(r)
assert reader.readline() == "calling\\n"
early, _, _ = select.select([r], [], [], 0.5)  # the child's call must wait for the holder's
say("early: " + (reader.readline().strip() if early else "none"))
release.set()
holder.join(20)
say("child: " + reader.readline().strip())
os.waitpid(pid, 0)
"""
)


def test_a_child_forked_beside_a_running_call_waits_for_it(lab: Lab) -> None:  # noqa: F811
    """Forked from another thread while a call on the key writes: the child's call waits until that
    call has stamped, and is `skipped` (today: `recovered` at once, a second write)."""
    lines = _run(FORK_BESIDE)
    assert "early: none" in lines and "child: skipped" in lines and "holder: applied" in lines, lines
    assert lab.outcomes("k-fork-beside") == ["applied", "skipped"] and lab.writes() == {"k-fork-beside": 1}


FORK_HOLDER_DIES = (
    PRELUDE
    + """
writing = threading.Event()
def write(payload):
    writing.set()
    threading.Event().wait()  # until this process is killed
threading.Thread(target=lambda: exactly_once_sync(kind="email", payload="p", write=write, key="k-fork-dies"),
                 daemon=True).start()
writing.wait(10)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.alarm(20)
    os.close(r)
    os.write(w, b"calling\\n")
    say("child: " + in_new_thread("k-fork-dies"))
    os._exit(0)
os.close(w)
assert os.read(r, 100) == b"calling\\n"
os.kill(os.getpid(), signal.SIGKILL)  # the holder dies mid-write: its claim is now truly interrupted
"""
)


def test_a_child_whose_holder_died_recovers(lab: Lab) -> None:  # noqa: F811
    out = subprocess.run(
        [sys.executable, "-c", FORK_HOLDER_DIES], capture_output=True, text=True, timeout=60, env=os.environ
    )  # (the pipe closes when the orphaned child exits)
    assert out.returncode == -9, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["child: recovered"], out.stderr[-3000:]
    assert lab.outcomes("k-fork-dies") == ["interrupted", "recovered"] and lab.writes() == {"k-fork-dies": 2}


# --- finding 3: a write that returns a coroutine or a generator -------------------------------------


async def _send(payload: str) -> None:
    pass


def _wrapped(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)

    return wrapper


class _AsyncCall:
    async def __call__(self, payload: str) -> None:
        pass


def _lines(payload: str):
    yield payload  # never runs: calling a generator function only makes the generator


async def _async_lines(payload: str):
    yield payload


ASYNC_SHAPED = {
    "staticmethod of async def": staticmethod(_send),
    "partial of an async __call__": functools.partial(_AsyncCall()),
}
NEVER_RUN = {"generator function": _lines, "async generator function": _async_lines}


@pytest.mark.parametrize("name", [*ASYNC_SHAPED, *NEVER_RUN])
async def test_a_sync_write_that_is_async_or_a_generator_is_refused_before_the_claim(lab: Lab, name: str) -> None:  # noqa: F811
    """Today these are refused only after the claim (async ones: the claim stays unstamped) or not at
    all (generators: the write never runs, yet the effect is stamped `applied`)."""
    write = {**ASYNC_SHAPED, **NEVER_RUN}[name]
    with pytest.raises(EffectRefused, match="before anything was claimed"):
        await asyncio.to_thread(exactly_once_sync, kind="email", payload="p", write=write, key="k-shape")
    assert lab.row("k-shape") is None and not lab.probe.exists()


@pytest.mark.parametrize("name", list(NEVER_RUN))
async def test_an_async_call_refuses_a_generator_write_before_the_claim(lab: Lab, name: str) -> None:  # noqa: F811
    with pytest.raises(EffectRefused, match="before anything was claimed"):
        await call("async", kind="email", payload="p", write=NEVER_RUN[name], key="k-gen")
    assert lab.row("k-gen") is None and not lab.probe.exists()


@pytest.mark.parametrize("name", list(ASYNC_SHAPED))
async def test_an_async_call_awaits_an_async_shaped_write(lab: Lab, name: str) -> None:  # noqa: F811
    assert await call("async", kind="email", payload="p", write=ASYNC_SHAPED[name], key="k-aw") == "applied"


RETURNS = {
    "coroutine": lambda p: _send(p),
    "generator": lambda p: _lines(p),
    # a wrapper is judged by what it returns, not by its __wrapped__: asgiref's async_to_sync(f) is a
    # sync callable whose __wrapped__ is the async def f
    "coroutine-wrapped": _wrapped(_send),
    "generator-wrapped": _wrapped(_lines),
}


@pytest.mark.parametrize("api", ["async", "sync"])
@pytest.mark.parametrize("made", list(RETURNS))
async def test_a_write_that_returns_what_never_runs_is_refused_and_recoverable(
    lab: Lab,  # noqa: F811 - the fixture's name
    api: str,
    made: str,  # noqa: F811
) -> None:
    """A plain callable cannot be told apart before it is called. What it returned is closed unrun and
    the call refused, saying so: nothing was written, so its probe record is retracted and its attempt
    is `refused` (#51 item 10: the probe log had counted writes that never happened, and the attempt
    read as interrupted); the claim stays unstamped, and the next call with a write that writes is
    `recovered` (not refused again), the one write the probe log counts."""
    returns = made.split("-")[0]
    if api == "async" and returns == "coroutine":
        pytest.skip("the async API awaits a returned coroutine")
    key = f"k-returns-{api}-{made}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "coroutine was never awaited" at exit
        with pytest.raises(EffectRefused, match=f"returned a {returns}.*nothing it holds was run.*recovered"):
            await call(api, kind="email", payload="p", write=RETURNS[made], key=key)
    assert lab.row(key)["applied_at"] is None and lab.outcomes(key) == ["refused"]
    assert lab.writes().get(key, 0) == 0
    with pytest.raises(EffectRefused):  # refused the same way again: still nothing counted
        await call(api, kind="email", payload="p", write=RETURNS[made], key=key)
    sent: list[str] = []
    assert await call(api, kind="email", payload="p", write=sent.append, key=key) == "recovered"
    assert sent == ["p"] and lab.outcomes(key) == ["refused", "refused", "recovered"]
    assert lab.writes()[key] == 1
