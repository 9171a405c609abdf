"""Identity-checked process handles: a pid is ours only if its start time and command line match
what we recorded when we started it. A reused or foreign pid is never signalled.

The start time compared is the kernel's, in clock ticks since boot (/proc/PID/stat): psutil's
create_time is boot time + those ticks, and the boot time it reads follows the wall clock, so a
clock step (NTP, a VM resumed) moved every recorded process's create_time by the step and `stop`
took its own dev server for a stranger. create_time stays in records (for people, and for records
written without ticks, compared as before)."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import signal
import socket
import stat
import weakref
from collections.abc import Collection, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from checkpoint_tui.waiting import wait_until_sync

RECORD_LIMIT = 64 * 1024  # a process record is a few hundred bytes
CREATE_TIME_SLACK_S = 0.05  # create_time (records without ticks) is rounded to the clock tick
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) from /proc/PID/stat (fields 3 and 22; the
    fields after the command name, which may hold spaces and parentheses, are split from its last
    ')'), in one read; None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read(4096)
        fields = data[data.rindex(b")") + 2 :].split()
        return fields[0].decode("ascii", "replace"), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def start_ticks(pid: int) -> int | None:
    stat = proc_stat(pid)
    return stat[1] if stat is not None else None


def started_before(pid: int, other: ProcIdentity, slack_s: float) -> bool | None:
    """Whether process `pid` started more than `slack_s` before `other` did (None: it is gone)."""
    ticks = start_ticks(pid)
    if ticks is None:
        return None
    if other.start_ticks is not None:
        return ticks < other.start_ticks - slack_s * CLOCK_TICKS
    try:
        return psutil.Process(pid).create_time() < other.create_time - slack_s
    except psutil.Error:
        return None


@dataclass(frozen=True)
class ProcIdentity:
    pid: int
    create_time: float
    cmdline: tuple[str, ...]
    start_ticks: int | None = None  # None: a record written without them (create_time compared)

    @classmethod
    def of(cls, pid: int) -> ProcIdentity | None:
        try:
            p = psutil.Process(pid)
            ident = cls(pid, p.create_time(), tuple(p.cmdline()), start_ticks(pid))
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
        return ident if ident.start_ticks is not None else None

    def same_start(self, other: ProcIdentity) -> bool:
        """Whether `other` (a fresh look at the pid) started when this one did."""
        if self.start_ticks is not None and other.start_ticks is not None:
            return self.start_ticks == other.start_ticks
        return abs(other.create_time - self.create_time) < CREATE_TIME_SLACK_S

    def _started_at(self, ticks: int) -> bool:
        """Whether the pid's process, started at `ticks`, is the one recorded."""
        if self.start_ticks is not None:
            return ticks == self.start_ticks
        try:  # a record without ticks: its create_time, compared as it always was
            return abs(psutil.Process(self.pid).create_time() - self.create_time) < CREATE_TIME_SLACK_S
        except psutil.Error:
            return False

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cmdline"] = list(self.cmdline)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> ProcIdentity:
        if not isinstance(d, dict):
            raise TypeError("an identity is a JSON object")
        ticks = d.get("start_ticks")
        ticks = ticks if isinstance(ticks, int) and not isinstance(ticks, bool) and ticks >= 0 else None
        return cls(int(d["pid"]), float(d["create_time"]), tuple(str(a) for a in d["cmdline"]), ticks)

    @classmethod
    def from_record(cls, rec: object) -> ProcIdentity | None:
        """The identity in a record under run/, or None if the record is malformed (files there are
        untrusted input like any other)."""
        try:
            ident = cls.from_dict(rec["identity"])  # type: ignore[index]
        except (KeyError, TypeError, ValueError, OverflowError):
            return None
        return ident if ident.pid > 1 else None

    def runs(self, *args: str) -> bool:
        """Whether the recorded command line holds `args` as consecutive arguments: a record of ours
        names our command (this home's worker, this home's dev server), not any process of this user."""
        cmd, n = self.cmdline, len(args)
        return any(cmd[i : i + n] == args for i in range(len(cmd) - n + 1))

    def exists(self) -> bool:
        """Still in the process table as the same process (not yet reaped, not a zombie): one read of
        /proc/PID/stat (wait loops call it every few milliseconds)."""
        stat = proc_stat(self.pid)
        return stat is not None and stat[0] != "Z" and self._started_at(stat[1])

    def matches_live(self) -> bool:
        """Alive (not a zombie) and still the very process we recorded: its start time, and its command
        line, or a title it gave itself that is the end of that command line (npm, a node program run
        through `#!/usr/bin/env node`, sets process.title to `npm run worker`: its argv becomes that
        one string, padded with empty ones)."""
        if not self.exists():
            return False
        try:
            live = tuple(psutil.Process(self.pid).cmdline())
        except psutil.Error:
            return False
        return live == self.cmdline or _retitled(live, self.cmdline) or _execd_tail(live, self.cmdline)


def _retitled(live: tuple[str, ...], recorded: tuple[str, ...]) -> bool:
    """`live` is one string (then empty ones) whose words are the recorded command line's last words,
    its program compared by name (`npm run worker` for `/usr/bin/env node /usr/bin/npm run worker`)."""
    if not live or any(live[1:]):
        return False
    words = live[0].split()
    tail = recorded[-len(words) :] if words else ()
    return bool(words) and len(words) == len(tail) and Path(tail[0]).name == words[0] and list(tail[1:]) == words[1:]


def _execd_tail(live: tuple[str, ...], recorded: tuple[str, ...]) -> bool:
    """`live` is the end of the recorded command line: a wrapper that exec'd the rest (`env VAR=1 python
    w.py` runs on as `python w.py`, the same pid and start time)."""
    return 0 < len(live) < len(recorded) and recorded[-len(live) :] == live


def identity_after_exec(pid: int, cmd: list[str], timeout: float = 5.0) -> ProcIdentity | None:
    """The identity of a child we just spawned, once it has exec'd `cmd` (before that, psutil still
    sees the forked parent's command line). None if it died first."""
    seen: list[ProcIdentity | None] = []

    def execd_or_gone() -> bool:
        seen.append(ProcIdentity.of(pid))
        return seen[-1] is None or list(seen[-1].cmdline) == cmd

    wait_until_sync(execd_or_gone, timeout, every=0.002)
    ident = seen[-1] if seen else None
    return ident if ident is not None and list(ident.cmdline) == cmd else None


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """The kernel sends `sig` to this process when its parent goes, however it goes (also usable as a
    child's preexec_fn, before exec)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)


def bind_to_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """Die (by `sig`) with the process that started this one (a SIGKILLed `chaos` or `replay` leaves
    nothing of its own behind). A parent already gone before the binding took: exit now."""
    die_with_parent(sig)
    if os.getppid() != parent:
        os._exit(1)


def started_with(pid: int, name: str, limit: int = 1 << 20) -> str | None:
    """The value of `name` in the environment a process was started with (/proc/<pid>/environ: what
    it was exec'd with, which it cannot rewrite; readable for this user's processes only), or None."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read(limit)
    except OSError:
        return None
    prefix = name.encode() + b"="
    for entry in raw.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("utf-8", "replace")
    return None


@contextlib.contextmanager
def _pinned_if_ours(ident: ProcIdentity) -> Iterator[int | None]:
    """A pidfd of `ident`'s pid if that pid is still `ident` (else None): the pidfd pins the process, so
    neither it nor its group id can be reused between this check and a signal sent while it is open."""
    try:
        fd = os.pidfd_open(ident.pid)
    except (ProcessLookupError, OSError):
        yield None
        return
    try:
        yield fd if ident.matches_live() else None
    finally:
        os.close(fd)


class ExitFd:
    """Whether a process we did not start is still alive, asked as often as a supervisor tick likes: a
    pidfd opened once (then the identity checked, so the pidfd is known to hold *that* process) turns
    readable when it exits: one poll(2), where psutil reads two /proc files per call."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd  # None: gone
        self._close = weakref.finalize(self, os.close, fd) if fd is not None else None

    @classmethod
    def pin(cls, ident: ProcIdentity) -> ExitFd | None:
        """A pin of `ident`, or None if the system has no pidfds (the caller falls back to /proc)."""
        try:
            pin = cls(os.pidfd_open(ident.pid))
        except ProcessLookupError:
            return cls(None)
        except OSError:
            return None
        if not ident.exists():  # the pid is gone, or someone else's: the pin holds a stranger
            pin._gone()
        return pin

    def alive(self) -> bool:
        if self._fd is None:
            return False
        poller = select.poll()  # not select(): it fails for descriptors past 1023
        poller.register(self._fd, select.POLLIN)
        if poller.poll(0):  # readable: exited (a zombie counts as gone, as in exists())
            self._gone()
        return self._fd is not None

    def _gone(self) -> None:
        self._fd = None
        if self._close is not None:
            self._close()


def send_signal_if_ours(ident: ProcIdentity, sig: int) -> bool:
    """Signal only if the pid is still `ident`."""
    with _pinned_if_ours(ident) as fd:
        if fd is None:
            return False
        try:
            signal.pidfd_send_signal(fd, sig)
        except ProcessLookupError:
            return False
        return True


def signal_group_if_ours(ident: ProcIdentity, sig: int) -> bool:
    """Signal the process and its process group (a session leader we spawned: a user's worker command
    may fork its real worker), only if the leader is still `ident`."""
    with _pinned_if_ours(ident) as fd:
        if fd is None:
            return False
        try:
            if os.getpgid(ident.pid) == ident.pid:  # started in a session of its own
                os.killpg(ident.pid, sig)  # the leader and whatever it forked, in one signal each
            else:
                signal.pidfd_send_signal(fd, sig)
        except ProcessLookupError:
            return False
        return True


def wait_gone(ident: ProcIdentity, timeout: float, poll: float = 0.005) -> bool:
    return wait_until_sync(lambda: not ident.exists(), timeout, every=poll)


def stop_process(ident: ProcIdentity, grace: float = 5.0, group: bool = False) -> bool:
    """SIGTERM, then SIGKILL after `grace`; True if it is gone (or was not ours/alive). With `group`,
    its process group is signalled too (signal_group_if_ours)."""
    send = signal_group_if_ours if group else send_signal_if_ours
    if not send(ident, signal.SIGTERM):
        return True
    if wait_gone(ident, grace):
        return True
    send(ident, signal.SIGKILL)
    return wait_gone(ident, 2.0)


def write_json(path: Path, data: dict) -> None:
    """Replace `path` atomically through a fresh temp file (O_EXCL|O_NOFOLLOW: never through a link)."""
    write_text(path, json.dumps(data, indent=1))


def write_text(path: Path, text: str) -> None:
    """Replace `path` atomically through a temp file of this writer's own (O_EXCL|O_NOFOLLOW: never through
    a link): two processes writing the same record (a chaos command and its supervisor) never rename one
    temp file between them."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def read_json(path: Path, limit: int = RECORD_LIMIT) -> dict | None:
    """A record under run/, or None if it is missing, too big, a link, not a regular file (a FIFO planted
    there is not waited on: O_NONBLOCK), or not a JSON object."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = fh.read(limit + 1)
    if len(raw) > limit:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def open_lock(path: Path) -> int:
    """A lock file's descriptor: created 0600, never truncated, never opened through a symlink."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# A port a dev server keeps on record must stay its own while it restarts (chaos kills it; its workers
# reconnect to the recorded address): one picked by the kernel for bind(0) comes from the ephemeral
# range, where any other program's next bind(0) (another home's server, a test's model server) may take
# it in that gap. Below the ephemeral range, only another pick of this kind can.
def _below_ephemeral() -> range:
    """Ports below the kernel's ephemeral range (32768 on Linux unless set lower), above 10000."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(max(10000, low - 12768), max(10000, low))


RECORDED_PORTS = _below_ephemeral()  # empty where the ephemeral range starts at 10000 or lower


def free_port_below_ephemeral(taken: Collection[int] = ()) -> int:
    """A free loopback port outside the kernel's ephemeral range (RECORDED_PORTS), not in `taken`; a
    bind(0) port if none is found in 200 tries."""
    rng = secrets.SystemRandom()
    for _ in range(200 if RECORDED_PORTS else 0):
        port = rng.randrange(RECORDED_PORTS.start, RECORDED_PORTS.stop)
        if port not in taken and port_is_free(port):
            return port
    return free_port()


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
