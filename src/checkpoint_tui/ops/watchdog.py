"""The hung-worker watchdog: a worker that is alive but cannot make progress is as good as dead, so
the supervisor SIGKILLs it and promotes the spare, like after any other death.

"Cannot make progress" is either a stopped process (state T or t in /proc/<pid>/stat: SIGSTOP,
SIGTSTP, a debugger) for at least GRACE_S, or a running one whose event loop has not written its
liveness beat (run/beat-<pid>, loop_worker/liveness.py) for BEAT_STALE_S: a blocking call or a runaway
computation in an activity. A pidfd does not wake the supervisor for either, so the check runs on its
housekeeping tick; it reads one small /proc file and stats one beat file per worker of ours (1-3 per
tick), never scans the process table. A beat older than the process (a pid reused) does not count,
nor a missing one (a worker still starting: a startup death is caught by the exit watch).

A deliberate pause (chaos's pause nemesis) is held off: `hold()` writes run/watchdog-hold.json naming
the worker by pid *and* create time with a deadline; the file is read only when a worker is found
stopped, so an idle supervisor never opens it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from checkpoint_tui.ops.procs import ProcIdentity, read_json, write_json
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.settings import BEAT_EVERY_S, Settings

GRACE_S = 1.0  # stopped at least this long: hung (a GC pause or a page-in never stops a process)
# No beat for this long: hung. 12 missed beats: a cold worker replaying a 25-step segment on a loaded
# 2-core machine stalls its loop well under a second; a stuck PostgreSQL lock gives up after ~1.5 s.
BEAT_STALE_S = 12 * BEAT_EVERY_S
HOLD_FILE = "watchdog-hold.json"
STOPPED_STATES = {"T": "stopped (SIGSTOP)", "t": "stopped by a tracer"}


def proc_state(pid: int) -> str | None:
    """The one-letter state of /proc/<pid>/stat (R, S, D, T, t, Z, ...), or None if it is gone. The
    command name in parentheses may hold spaces and parentheses: the state follows the last ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read(512)
    except OSError:
        return None
    rest = raw[raw.rfind(b")") + 1 :].split()
    return rest[0].decode() if rest else None


@dataclass(frozen=True)
class Hang:
    pid: int
    reason: str  # "hung: stopped (SIGSTOP) for 1.02 s"
    stopped_s: float


@dataclass
class Watchdog:
    settings: Settings
    grace_s: float = GRACE_S
    beat_stale_s: float = BEAT_STALE_S
    _since: dict[int, float] = field(default_factory=dict)  # pid -> when first seen stopped
    _excused: dict[int, float] = field(default_factory=dict)  # pid -> last seen stopped (wall clock)

    def check(self, workers: Iterable[tuple[int, ProcIdentity]]) -> list[Hang]:
        """Workers (pid, identity) stopped for at least the grace and not held off by a pause nemesis."""
        now = time.monotonic()
        hung: list[Hang] = []
        seen: set[int] = set()
        for pid, ident in workers:
            state = proc_state(pid)
            if state is None or state == "Z":
                continue
            if state not in STOPPED_STATES:
                hang = self._beat_overdue(pid, ident)
                if hang is not None:
                    hung.append(hang)
                continue
            seen.add(pid)
            self._excused[pid] = time.time()  # its beat stops too: counted from when it runs again
            stopped = now - self._since.setdefault(pid, now)
            if stopped >= self.grace_s and not held(self.settings, ident):
                hung.append(Hang(pid, f"hung: {STOPPED_STATES[state]} for {stopped:.2f} s", stopped))
        for pid in set(self._since) - seen:  # running again, or gone
            del self._since[pid]
        return hung

    def _beat_overdue(self, pid: int, ident: ProcIdentity) -> Hang | None:
        try:
            beat = self.settings.beat_file(pid).stat().st_mtime
        except OSError:
            return None  # not beating yet (starting), or not a worker that beats
        if beat < ident.create_time:
            return None  # an earlier process's file under a reused pid
        silent = time.time() - max(beat, self._excused.get(pid, 0.0))
        if silent < self.beat_stale_s or held(self.settings, ident):
            return None
        self._excused.pop(pid, None)
        return Hang(pid, f"hung: no liveness beat for {silent:.1f} s", silent)

    def hung(self, workers: Iterable[WorkerProc]) -> list[tuple[WorkerProc, Hang]]:
        """check() over the pool's workers, paired with the worker each hang belongs to."""
        by_pid = {w.pid: w for w in workers}
        return [(by_pid[h.pid], h) for h in self.check((w.pid, w.ident) for w in by_pid.values())]

    @property
    def watching_stop(self) -> bool:
        """A worker is stopped right now (the supervisor ticks fast until it is dealt with)."""
        return bool(self._since)


def hold(settings: Settings, ident: ProcIdentity, seconds: float) -> None:
    """Tell the home's supervisor not to kill this worker for being stopped during the next `seconds`."""
    holds = _live_holds(settings)
    holds[str(ident.pid)] = {"create_time": ident.create_time, "until": time.time() + seconds}
    write_json(settings.run_dir / HOLD_FILE, holds)


def release(settings: Settings, ident: ProcIdentity) -> None:
    holds = _live_holds(settings)
    if holds.pop(str(ident.pid), None) is not None:
        write_json(settings.run_dir / HOLD_FILE, holds)


def held(settings: Settings, ident: ProcIdentity) -> bool:
    entry = _live_holds(settings).get(str(ident.pid))
    return entry is not None and abs(float(entry.get("create_time", 0)) - ident.create_time) < 0.05


def _live_holds(settings: Settings) -> dict:
    """Unexpired holds from run/ (untrusted like every record there: malformed entries are dropped)."""
    now, live = time.time(), {}
    for pid, entry in (read_json(settings.run_dir / HOLD_FILE) or {}).items():
        try:
            if float(entry["until"]) > now:
                live[pid] = {"create_time": float(entry["create_time"]), "until": float(entry["until"])}
        except (KeyError, TypeError, ValueError):
            continue
    return live
