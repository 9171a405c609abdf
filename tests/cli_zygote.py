"""A fork server for the tests' CLI calls: one process per xdist worker imports what a headless command
imports (Temporal's SDK, the chaos engine, the audits: most of a short command's CPU) once; each
`run_cli` is a fork of it that runs `python -m checkpoint_tui ARGS` as a fresh interpreter would, in its
own process, with its own stdin, stdout, stderr, working directory and environment, and its exit status.

What the process boundary tests (exit codes, output, signals, what is left behind) still holds: each
call is a real process. What a fork does not give: the import of the package itself (the tests that
need it start real interpreters: packaging, headless imports, the console script), a hash seed of its
own, and /proc/PID/cmdline and environ of its own (the zygote's). A call whose environment differs in
what is read at interpreter start or import (PYTHON*, locale, TZ, CHECKPOINT_HOST) gets a real
interpreter, as does every call with CHECKPOINT_TESTS_FORK_CLI=0.

Run as `python cli_zygote.py SOCKET ROOT` (ROOT: the session's temp root, named so that a zygote left
behind is found by conftest's leftover check). Protocol, one SOCK_SEQPACKET connection per call: the
client sends a JSON request {"args", "env", "cwd"} with three fds (stdin, stdout, stderr); the zygote
answers `pid N`, then `exit STATUS` (a wait status) once the child ends. `kill` from the client, or the
client's connection closing, SIGKILLs the child if it has not been reaped (its pid is still ours)."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

PRELOAD = (
    "checkpoint_tui.cli",
    "checkpoint_tui.cli.commands",
    "checkpoint_tui.cli.status",
    "checkpoint_tui.cli.gameday",
    "checkpoint_tui.proof.chaos.command",
    "checkpoint_tui.proof.chaos.engine",
    "temporalio.client",
    "temporalio.worker",
)
# Read at interpreter start or at import: a call that changes one gets a real interpreter (conftest.run_cli).
IMPORT_TIME_ENV = ("CHECKPOINT_HOST", "LANG", "TZ")
IMPORT_TIME_PREFIXES = ("PYTHON", "LC_")
START_TIMEOUT_S = 60.0
MAX_REQUEST = 1 << 20


def _preload() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    # A fork copies only the forking thread: one left running by an import would be missing in each child.
    if threading.active_count() != 1 or len(os.listdir("/proc/self/task")) != 1:
        sys.exit("cli_zygote: an import left a thread running; run_cli falls back to real interpreters")


def _child(request: dict, fds: list[int]) -> None:
    """In the fork: become `python -m checkpoint_tui ARGS` (returns to run it at top level)."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.path[0] = os.getcwd()  # as `-m` sets it


def _serve(path: str) -> dict | None:
    """Answer calls until the parent (the xdist worker) goes; in a fork, return its request."""
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    by_conn: dict[socket.socket, int] = {}
    print("ready", flush=True)
    while os.getppid() == parent:
        for key, _ in sel.select(timeout=1.0):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                msg, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, 3)
                if len(fds) != 3:
                    conn.close()
                    continue
                sys.stdout.flush()
                pid = os.fork()
                if pid == 0:
                    sel.close()
                    listener.close()
                    conn.close()
                    signal.set_wakeup_fd(-1)
                    os.close(wake_r)
                    os.close(wake_w)
                    request = json.loads(msg)
                    _child(request, fds)
                    return request
                for fd in fds:
                    os.close(fd)
                children[pid], by_conn[conn] = conn, pid
                conn.send(f"pid {pid}".encode())
                sel.register(conn, selectors.EVENT_READ)
            elif key.fileobj == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
                _reap(children, by_conn, sel)
            else:  # a client: `kill`, or gone
                conn = key.fileobj
                said = b""  # a reset connection is a gone client
                with contextlib.suppress(OSError):
                    said = conn.recv(64)
                pid = by_conn.get(conn)
                if pid is not None and pid in children:  # not reaped: the pid is still our child's
                    os.kill(pid, signal.SIGKILL)
                if not said:
                    sel.unregister(conn)
                    by_conn.pop(conn, None)
                    conn.close()
        _reap(children, by_conn, sel)
    return None


def _reap(children: dict[int, socket.socket], by_conn: dict, sel: selectors.BaseSelector) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send(f"exit {status}".encode())


def main() -> None:
    _preload()
    request = _serve(sys.argv[1])
    if request is None:
        return
    import runpy

    sys.argv = ["-m", *request["args"]]  # runpy sets argv[0] to the module's file, as `-m` does
    runpy.run_module("checkpoint_tui", run_name="__main__", alter_sys=True)


class Zygote:
    """The client side, in a pytest process: starts the fork server on first use, stops it at the end."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = str(root / f"cli-zygote-{os.getpid()}.sock")
        self.proc: subprocess.Popen | None = None
        self.broken = False
        self.started_env: dict[str, str] = {}

    def _started(self) -> bool:
        if self.proc is not None and self.proc.poll() is None:
            return True
        if self.broken:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        argv = [sys.executable, __file__, self.path, str(self.root)]
        self.started_env = dict(os.environ)
        with open(self.root / f"cli-zygote-{os.getpid()}.log", "ab") as log:  # its own words, never a full pipe
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        assert self.proc.stdout is not None
        ready = selectors.DefaultSelector()
        ready.register(self.proc.stdout, selectors.EVENT_READ)
        line = self.proc.stdout.readline() if ready.select(START_TIMEOUT_S) else b""
        ready.close()
        if line.strip() != b"ready":
            self.stop()
            self.broken = True  # real interpreters from now on (its log says why)
            return False
        return True

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def run(self, args: list[str], env: dict, cwd: Path | None, timeout: float) -> subprocess.CompletedProcess | None:
        """The call's result, as subprocess.run(capture_output=True, text=True) gives it; None when the
        fork server is not available (the caller starts a real interpreter)."""
        if not self._started() or _starts_differently(env, self.started_env):
            return None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            request = {"args": args, "env": env, "cwd": str(cwd or os.getcwd())}
            socket.send_fds(conn, [json.dumps(request).encode()], [stdin, out_w, err_w])
        except OSError:  # the server died since it started: this call, and the next, a real interpreter
            conn.close()
            os.close(out_r)
            os.close(err_r)
            self.broken = True
            return None
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
        try:
            return _collect(conn, out_r, err_r, ["-m", "checkpoint_tui", *args], timeout)
        finally:
            conn.close()


def _starts_differently(env: dict, started: dict) -> bool:
    """Whether a fresh interpreter with `env` would start or import differently from the zygote, which
    started with `started` (a test may have changed the client's environment since)."""
    keys = {k for k in {*env, *started} if k in IMPORT_TIME_ENV or k.startswith(IMPORT_TIME_PREFIXES)}
    return any(env.get(k) != started.get(k) for k in keys)


def _collect(conn: socket.socket, out_r: int, err_r: int, argv: list[str], timeout: float):
    """Read the child's output to its end and its exit status, as subprocess.run does (killed at the
    deadline: TimeoutExpired)."""
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    sel = selectors.DefaultSelector()
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    sel.register(conn, selectors.EVENT_READ)
    status: int | None = None
    deadline = time.monotonic() + timeout
    killed = False
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                if killed:
                    break
                with contextlib.suppress(OSError):
                    conn.send(b"kill")
                killed, deadline = True, time.monotonic() + 10
                continue
            for key, _ in sel.select(timeout=left):
                if key.fileobj is conn:
                    said = conn.recv(64).decode()
                    status = int(said.split()[1]) if said.startswith("exit ") else status
                    if not said or status is not None:
                        sel.unregister(conn)
                elif data := os.read(key.fd, 65536):
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()
        os.close(out_r)
        os.close(err_r)
    # as text=True decodes in this environment (UTF-8, strict), with universal newlines
    out, err = (_text(b"".join(chunks[fd])) for fd in (out_r, err_r))
    if killed:
        raise subprocess.TimeoutExpired(argv, timeout, out, err)
    if status is None:  # the fork server died under the call: no exit status to give
        raise RuntimeError(f"cli_zygote: no exit status for {argv[2:5]}: the fork server died (see its log)")
    return subprocess.CompletedProcess(argv, os.waitstatus_to_exitcode(status), out, err)


def _text(data: bytes) -> str:
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    main()
