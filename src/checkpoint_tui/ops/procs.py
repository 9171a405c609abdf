"""Identity-checked process handles: a pid is ours only if its create time and command line match
what we recorded when we started it. A reused or foreign pid is never signalled."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class ProcIdentity:
    pid: int
    create_time: float
    cmdline: tuple[str, ...]

    @classmethod
    def of(cls, pid: int) -> ProcIdentity | None:
        try:
            p = psutil.Process(pid)
            return cls(pid, p.create_time(), tuple(p.cmdline()))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cmdline"] = list(self.cmdline)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ProcIdentity:
        return cls(int(d["pid"]), float(d["create_time"]), tuple(d["cmdline"]))

    def exists(self) -> bool:
        """Still in the process table as the same process (not yet reaped, not a zombie)."""
        try:
            p = psutil.Process(self.pid)
            return abs(p.create_time() - self.create_time) < 0.05 and p.status() != psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False

    def matches_live(self) -> bool:
        """Alive (not a zombie) and still the very process we recorded."""
        try:
            p = psutil.Process(self.pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                return False
            return abs(p.create_time() - self.create_time) < 0.05 and tuple(p.cmdline()) == self.cmdline
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False


def identity_after_exec(pid: int, cmd: list[str], timeout: float = 5.0) -> ProcIdentity | None:
    """The identity of a child we just spawned, once it has exec'd `cmd` (before that, psutil still
    sees the forked parent's command line). None if it died first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ident = ProcIdentity.of(pid)
        if ident is None:
            return None
        if list(ident.cmdline) == cmd:
            return ident
        time.sleep(0.002)
    return None


def send_signal_if_ours(ident: ProcIdentity, sig: int) -> bool:
    """Signal only if the pid is still `ident`. A pidfd pins the process between check and kill."""
    try:
        fd = os.pidfd_open(ident.pid)
    except (ProcessLookupError, OSError):
        return False
    try:
        if not ident.matches_live():
            return False
        signal.pidfd_send_signal(fd, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def wait_gone(ident: ProcIdentity, timeout: float, poll: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not ident.exists():
            return True
        time.sleep(poll)
    return not ident.exists()


def stop_process(ident: ProcIdentity, grace: float = 5.0) -> bool:
    """SIGTERM, then SIGKILL after `grace`; True if it is gone (or was not ours/alive)."""
    if not send_signal_if_ours(ident, signal.SIGTERM):
        return True
    if wait_gone(ident, grace):
        return True
    send_signal_if_ours(ident, signal.SIGKILL)
    return wait_gone(ident, 2.0)


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_is_free(port: int) -> bool:
    """Free to listen on, as a server would bind it (SO_REUSEADDR: TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_open(host: str, port: int, timeout: float = 0.2) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=timeout):
        return True
    return False
