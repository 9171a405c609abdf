"""Task-queue backlog over time, sampled from Temporal itself: how far work piles up while the fleet
is down and how long it takes to drain once workers are back (a game day's "backlog growth and drain
time"). The sampler appends JSON lines under run/; the pure functions below read them back for the
report. The file may have been edited by anyone who can write run/, so reading it is bounded and
every line is checked.

Resolution: the server caches a queue's DescribeTaskQueue answer for matching.TaskQueueInfoByBuildIdTTL
(5 s by default), so the count is late by up to that much either way. Measured on the dev server: a
backlog showed 0.01-5.0 s after the workflow started and read 0 again ~4.8 s after the worker took the
task; with that TTL set to 500ms, 0.18 s and 0.41 s. Sampling faster than the TTL repeats values."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from checkpoint_tui.errors import UsageError
from checkpoint_tui.files import read_input

log = logging.getLogger(__name__)

SAMPLE_LOG_CAP = 8 * 1024 * 1024  # ~70,000 samples of ~120 bytes: hours of four series at 0.5 s
LINE_MAX = 8 * 1024  # a task queue name is at most 1000 characters (the server's default limit)
SETTLE_MAX_S = 6.0  # the server's cache of the count (5 s by default) and a round
DESCRIBE_TIMEOUT = timedelta(seconds=2)  # a server that is restarting must not stall the next round
TYPES = {"workflow": TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, "activity": TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY}
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Sample:
    t: float  # wall time of the round (every series of one round carries the same t)
    queue: str
    type: str  # "workflow" | "activity"
    backlog: int  # approximate_backlog_count: approximate, and the server may report it late
    age_s: float  # approximate_backlog_age: how long the oldest waiting task has waited
    add_rate: float  # tasks added per second (the server's moving average)
    dispatch_rate: float  # tasks handed to pollers per second
    pollers: int  # distinct identities polling; a dead worker lingers in the list for a while


class BacklogSampler:
    """Describe each (queue, type) every `every_s` seconds and append one line per answer to `path`.

    Rounds never overlap: the next is armed when the last finished. A describe that fails (the server
    restarting, a timeout) or that carries no stats is skipped, not written as a zero: a missing
    sample reads as "unknown", a zero as "drained"."""

    def __init__(
        self,
        client: Client,
        namespace: str,
        queues: list[str],
        path: Path,
        every_s: float = 0.5,
        cap: int = SAMPLE_LOG_CAP,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.queues = list(dict.fromkeys(queues))
        self.path = Path(path)
        self.every_s = every_s
        self.cap = cap
        self.written = 0  # samples appended
        self.skipped = 0  # describes that failed or had no stats
        self.capped = False  # the file reached `cap`: later samples were dropped
        self._fd: int | None = None
        self._size = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._task is not None:
            return
        self._fd = _open_append(self.path)
        self._size = os.fstat(self._fd).st_size  # appending to an earlier file: its bytes count too
        self._task = asyncio.ensure_future(self._run())

    async def settle(self) -> None:
        """The runs are over: the pacing loop ends and more rounds are read, every_s apart, until two in a
        row read no backlog (SETTLE_MAX_S at most), so a backlog that drained as the last runs closed is
        seen drained, not left at its last count. On a server the lab did not start the count is cached up
        to 5 s (the module's docstring): two rounds 0.5 s apart read the stale count, and a churn that had
        drained read "never drained" (3 experiments of 64 in bench/shutdown_polls.py)."""
        await self._cancel()
        deadline, zeros = time.monotonic() + SETTLE_MAX_S, 0
        while self._fd is not None:
            found = await self.sample_once()
            self._append(found)
            zeros = zeros + 1 if found and all(s.backlog == 0 for s in found) else 0
            if zeros >= 2 or time.monotonic() >= deadline:
                return
            await asyncio.sleep(self.every_s)  # pacing between the rounds, as the loop's

    async def stop(self) -> None:
        await self._cancel()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def _cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def __aenter__(self) -> BacklogSampler:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def sample_once(self) -> list[Sample]:
        """One round: every (queue, type) that answered, stamped with the round's start."""
        t = time.time()
        found = []
        for queue in self.queues:
            for kind in TYPES:
                sample = await self._describe(t, queue, kind)
                if sample is None:
                    self.skipped += 1
                else:
                    found.append(sample)
        return found

    async def _run(self) -> None:
        while True:
            began = time.monotonic()
            self._append(await self.sample_once())
            # pacing, not a wait for a condition: the next round starts every_s after this one began
            await asyncio.sleep(max(0.0, self.every_s - (time.monotonic() - began)))

    async def _describe(self, t: float, queue: str, kind: str) -> Sample | None:
        # Legacy mode with report_stats: Temporal Server 1.32 (the dev server of temporal CLI 1.9.1)
        # answers `stats` there (measured), so the enhanced mode is not needed: it nests the same stats
        # under versions_info[""].types_info[type] and gave the same count for an unversioned queue. An
        # older server that leaves `stats` unset is skipped rather than read as an empty queue.
        req = DescribeTaskQueueRequest(
            namespace=self.namespace, task_queue=TaskQueue(name=queue), task_queue_type=TYPES[kind], report_stats=True
        )
        try:
            resp = await self.client.workflow_service.describe_task_queue(req, timeout=DESCRIBE_TIMEOUT)
        except Exception as err:  # any failure (RPC, connection, timeout) is one lost sample, not the end
            log.debug("describe %s/%s failed: %s", queue, kind, err)
            return None
        if not resp.HasField("stats"):
            return None
        stats = resp.stats
        age = stats.approximate_backlog_age
        return Sample(
            t=t,
            queue=queue,
            type=kind,
            backlog=int(stats.approximate_backlog_count),
            age_s=age.seconds + age.nanos / 1e9,
            add_rate=float(stats.tasks_add_rate),
            dispatch_rate=float(stats.tasks_dispatch_rate),
            pollers=len({p.identity for p in resp.pollers}),
        )

    def _append(self, samples: list[Sample]) -> None:
        if not samples or self._fd is None or self.capped:
            return
        data = b"".join(sample_line(s) for s in samples)
        if self._size + len(data) > self.cap:
            self.capped = True
            log.warning("backlog samples %s reached %d bytes; later samples are not written", self.path, self.cap)
            return
        try:
            written = os.write(self._fd, data)  # one append per round: a reader never sees half a round
        except OSError as err:  # a full disk: stop writing, keep the run going
            self.capped = True
            log.warning("backlog samples %s: cannot append (%s); later samples are not written", self.path, err)
            return
        self._size += written
        self.written += len(samples)


def _open_append(path: Path) -> int:
    """Append to `path`, never through a symbolic link planted there; a FIFO or a device is refused
    (O_NONBLOCK: opening a FIFO with no reader fails at once instead of hanging the loop)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, _APPEND, 0o600)
    except OSError as err:  # ELOOP: a link; ENXIO: a FIFO nobody reads
        raise UsageError(f"cannot write backlog samples to {path}: {err.strerror or err}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"backlog samples {path} is not a regular file; refusing to write to it")
    return fd


def sample_line(sample: Sample) -> bytes:
    return (json.dumps(asdict(sample), ensure_ascii=False, separators=(",", ":")) + "\n").encode()


def read_samples(path: str | os.PathLike[str], limit: int = SAMPLE_LOG_CAP) -> list[Sample]:
    """Every well-formed sample, ordered by time. A missing file has none; a link, a FIFO or a file
    over `limit` is a UsageError naming it; a line that is not a sample (torn, edited, too long) is
    skipped."""
    try:
        data = read_input(path, "backlog samples", limit, follow=False)
    except UsageError:
        if not os.path.lexists(path):
            return []
        raise
    samples = [s for raw in data.splitlines() if (s := _parse(raw)) is not None]
    return sorted(samples, key=lambda s: s.t)


def _parse(raw: bytes) -> Sample | None:
    if len(raw) > LINE_MAX or not raw.strip():
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # ValueError covers bad UTF-8 and over-long integers too
        return None
    if not isinstance(value, dict):
        return None
    queue, kind = value.get("queue"), value.get("type")
    if not isinstance(queue, str) or kind not in TYPES:
        return None
    t, age_s, add_rate, dispatch_rate = (_number(value.get(k)) for k in ("t", "age_s", "add_rate", "dispatch_rate"))
    backlog, pollers = _count(value.get("backlog")), _count(value.get("pollers"))
    if t is None or age_s is None or add_rate is None or dispatch_rate is None or backlog is None or pollers is None:
        return None
    return Sample(t, queue, kind, backlog, age_s, add_rate, dispatch_rate, pollers)


def _number(value: Any) -> float | None:
    """A finite, non-negative number (JSON's Infinity and NaN, and booleans, are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and value >= 0 else None


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return None
    return value


def totals(samples: Iterable[Sample], queue: str | None = None) -> list[tuple[float, int]]:
    """The backlog summed over series (each (queue, type), or just `queue`'s two) at each sample time:
    every series counts with its latest value, so a round where one describe failed carries that
    series' previous value rather than reading as a drop."""
    latest: dict[tuple[str, str], int] = {}
    total = 0
    out: list[tuple[float, int]] = []
    for s in sorted(samples, key=lambda s: s.t):
        if queue is not None and s.queue != queue:
            continue
        key = (s.queue, s.type)
        total += s.backlog - latest.get(key, 0)
        latest[key] = s.backlog
        if out and out[-1][0] == s.t:  # the same round: one point with every series of it
            out[-1] = (s.t, total)
        else:
            out.append((s.t, total))
    return out


def peak(samples: Iterable[Sample], queue: str | None = None) -> tuple[int, float | None]:
    """The largest backlog and when it was first seen; (0, None) without samples."""
    return _peak(totals(samples, queue))


def _peak(points: list[tuple[float, int]]) -> tuple[int, float | None]:
    best, at = 0, None
    for t, total in points:
        if at is None or total > best:
            best, at = total, t
    return best, at


def drain_s(samples: Iterable[Sample], since: float, queue: str | None = None) -> float | None:
    """Seconds from `since` until the backlog is 0 and stays 0 for two consecutive samples (one zero
    could be the server's approximate count passing through); None if it never drained."""
    return _drain(totals(samples, queue), since)


def _drain(points: list[tuple[float, int]], since: float) -> float | None:
    after = [(t, total) for t, total in points if t >= since]
    for (t, total), (_, following) in zip(after, after[1:], strict=False):
        if total == 0 and following == 0:
            return t - since
    return None


def summary(samples: list[Sample], events: list[tuple[str, float, float]]) -> dict[str, Any]:
    """For the report: the overall peak, each queue's peak, and per fleet event (name, start, end) the
    peak backlog from its start until it drained (or the last sample) and the drain time from its end."""
    points = totals(samples)
    overall, overall_at = _peak(points)
    per_event = []
    for name, start, end in events:
        drained = _drain(points, end)
        until = end + drained if drained is not None else math.inf
        top, top_at = _peak([(t, total) for t, total in points if start <= t <= until])
        per_event.append({"name": name, "start": start, "end": end, "peak": top, "peak_at": top_at, "drain_s": drained})
    by_queue: dict[str, list[Sample]] = {}
    for s in samples:  # one pass, not one per queue: a hostile file may name thousands of queues
        by_queue.setdefault(s.queue, []).append(s)
    queues = {}
    for queue in sorted(by_queue):
        top, top_at = peak(by_queue[queue])
        queues[queue] = {"peak": top, "peak_at": top_at}
    return {"samples": len(samples), "peak": overall, "peak_at": overall_at, "queues": queues, "events": per_event}
