"""A fork server for the tests' CLI calls: one process per xdist worker imports what a headless command
imports (about 0.45 s of CPU: Temporal's SDK, the chaos engine, the audits) once; each `run_cli` is a
fork of it that runs `python -m checkpoint_tui ARGS` as a fresh interpreter would, in its own process,
with its own stdin, stdout, stderr, working directory and environment, and its exit status.

Measured: the suite's ~330 CLI calls paid that import each time (a `chaos` call 0.66 s of CPU, most of
it imports). What the process boundary tests (exit codes, output, signals, what is left behind) still
holds: each call is a real process. What it does not test is the import of the package itself; the
tests that do (packaging, headless imports, the console script) start real interpreters, and so does
every call when CHECKPOINT_TESTS_FORK_CLI=0.

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
# Read by modules at import: a call that sets one gets a real interpreter (conftest.run_cli).
IMPORT_TIME_ENV = ("CHECKPOINT_HOST", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONSAFEPATH")
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

    def _started(self) -> bool:
        if self.proc is not None and self.proc.poll() is None:
            return True
        if self.broken:
            return False
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        argv = [sys.executable, __file__, self.path, str(self.root)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline() if self.proc.stdout is not None else b""
        if line.strip() != b"ready":
            self.stop()
            self.broken = True  # said once, in the stop's output: real interpreters from now on
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
        if any(env.get(k) != os.environ.get(k) for k in IMPORT_TIME_ENV) or not self._started():
            return None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        stdin = os.open(os.devnull, os.O_RDONLY)
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.path)
            request = {"args": args, "env": env, "cwd": str(cwd or os.getcwd())}
            socket.send_fds(conn, [json.dumps(request).encode()], [stdin, out_w, err_w])
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
        try:
            return _collect(conn, out_r, err_r, ["-m", "checkpoint_tui", *args], timeout)
        finally:
            conn.close()


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
    # as text=True decodes: the locale's encoding, strict, universal newlines
    out, err = (_text(b"".join(chunks[fd])) for fd in (out_r, err_r))
    if killed:
        raise subprocess.TimeoutExpired(argv, timeout, out, err)
    code = os.waitstatus_to_exitcode(status) if status is not None else -9
    return subprocess.CompletedProcess(argv, code, out, err)


def _text(data: bytes) -> str:
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    main()
