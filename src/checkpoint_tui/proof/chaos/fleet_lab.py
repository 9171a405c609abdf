"""What chaos adds for a fleet (the game-day nemeses, proof/chaos/fleet_events.py): a proxy in front of
each --dependency (the workers get its address under the dependency's NAME), the task-queue backlog
sampled from Temporal for the whole run (run/backlog-<run id>.jsonl), the fleet nemeses fired, and the
report's `fleet` figures: per worker command, its starts, deaths, graceful exits and kills from the
ledger's worker events; per fleet event, the backlog's peak and its drain time after the event ended."""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import replace
from pathlib import Path

from temporalio.client import Client

from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger.fleet_queries import detail_text, worker_events_between
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import fleet
from checkpoint_tui.ops.worker_proc import VERSION_EVENT
from checkpoint_tui.proof.chaos.fleet_events import DEPENDENCY, FLEET_KINDS, check_against
from checkpoint_tui.proof.chaos.model_lab import ModelLab
from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.measure.backlog import BacklogSampler, read_samples
from checkpoint_tui.proof.measure.backlog import summary as backlog_summary
from checkpoint_tui.proof.nemeses import fleet as fleet_nemeses
from checkpoint_tui.proof.nemeses.dependency import DependencyProxy
from checkpoint_tui.proof.nemeses.http_log import HttpLog
from checkpoint_tui.proof.nemeses.processes import ended_at
from checkpoint_tui.proof.nemeses.records import Fired, Hit, Miss
from checkpoint_tui.proof.report.chaos import Backlog, CommandEvents, FleetFigures
from checkpoint_tui.proof.report.codec import decode
from checkpoint_tui.settings import FleetMember, Settings

WORKER_EVENTS = ("spawn", "respawn", "promote", "adopt", "died", "exit", "sigterm", "kill")


def check_events(settings: Settings, schedule: list[ChaosEvent], where: str = "the schedule") -> None:
    """Every queue, --deploy, --dependency and --model-endpoint the schedule's events name is this
    invocation's (exit 2, before anything starts)."""
    deploys, dependencies = [d.queue for d in settings.deploys], [n for n, _ in settings.dependencies]
    models = [n for n, _ in settings.model_endpoints]
    if len(set(models)) < len(models):
        raise UsageError("--model-endpoint: each NAME once (the workers get one URL per variable)")
    check_against(schedule, fleet.queues(settings), deploys, dependencies, where, models)
    for opts in (dict(ev.opts) for ev in schedule):
        if not settings.deployment and ("ramp_percent" in opts or "ramp_s" in opts):
            raise UsageError(f"{where}: a deploy's ramp is Worker Versioning's: give --deployment NAME")
        if "ramp_s" in opts and "ramp_percent" not in opts:
            raise UsageError(f"{where}: ramp_s goes with ramp_percent (the share of workflows version 2 gets)")


class FleetLab:
    def __init__(self, settings: Settings, schedule: list[ChaosEvent]) -> None:
        """Checks every fleet event against the invocation's fleet (exit 2, before anything starts)."""
        queues = fleet.queues(settings)
        check_events(settings, schedule)
        self.proxies: dict[str, DependencyProxy] = {}
        self.models = ModelLab()  # the --model-endpoint proxies and their faults
        self.sampler: BacklogSampler | None = None
        self.client: Client | None = None  # the run's, once it started (sample())
        self.backlog_path: Path | None = None
        self.queues = queues
        # The backlog is a game day's figure: sampled when the schedule has a fleet or dependency event
        # (two describes per queue every 0.5 s are not free for a plain kill schedule).
        self.sampled = any(ev.kind in (*FLEET_KINDS, DEPENDENCY) for ev in schedule)

    async def start(self, settings: Settings, logs: dict[str, HttpLog] | None = None) -> Settings:
        """Before the supervisor: a clean fleet state, and each dependency behind its proxy (`logs`: those
        whose 2xx answers are effects, --effects http:NAME:FIELD)."""
        fleet.clear(settings)
        routed = []
        for name, upstream in settings.dependencies:
            proxy = self.proxies[name] = DependencyProxy(name, upstream, (logs or {}).get(name))
            routed.append((name, await proxy.start()))
        settings = await self.models.start(settings)
        return replace(settings, dependencies=tuple(routed)) if routed else settings

    async def sample(self, settings: Settings, client: Client, run_id: str, load: bool = False) -> None:
        """From now on, when the schedule has a game-day event (or `load`: runs started at a rate)."""
        self.client = client  # the fleet nemeses wait for a worker to poll before they stop it
        if not (self.sampled or load):
            return
        self.backlog_path = settings.run_dir / f"backlog-{run_id}.jsonl"
        self.sampler = BacklogSampler(client, settings.namespace, self.queues, self.backlog_path)
        await self.sampler.start()

    async def strike(self, settings: Settings, ev: ChaosEvent) -> Hit | Miss | None:
        """A fleet or dependency nemesis fired; None: not one of these."""
        if ev.kind in FLEET_KINDS:
            return await _fire(settings, ev, self.client)
        if (model_hit := await self.models.strike(ev)) is not None:
            return model_hit
        if ev.kind != DEPENDENCY:
            return None
        opts = dict(ev.opts)
        name = str(opts.get("dependency") or next(iter(self.proxies)))
        proxy, fault, seconds = self.proxies[name], str(opts["fault"]), ev.duration_s or 1.0
        before = proxy.stats()
        at = time.time()
        try:
            await proxy.fault(fault, seconds, int(opts.get("latency_ms", 500)))  # type: ignore[call-overload]
        except RuntimeError as err:  # two faults of one dependency overlap in the schedule: said, not a crash
            return Miss(str(err)[:200])
        after = proxy.stats()
        hit = {k: v - _count(before.get(k)) for k, v in after.items() if isinstance(v, int)}
        return Hit(
            at,
            None,
            detail={
                "dependency": name,
                "fault": fault,
                "duration_s": seconds,
                "held_until": time.time(),
                "traffic": hit,
            },
        )

    async def settle(self) -> None:
        """Every run closed: the backlog's last rounds, read while the workers are still up."""
        if self.sampler is not None:
            with contextlib.suppress(Exception):
                await self.sampler.settle()

    async def close(self, settings: Settings) -> None:
        """Whatever ends the run: the sampler and the proxies stop; the fleet is as configured again."""
        if self.sampler is not None:
            with contextlib.suppress(Exception):
                await self.sampler.stop()
        for proxy in self.proxies.values():
            with contextlib.suppress(Exception):
                await proxy.close()
        await self.models.close()
        fleet.clear(settings)

    def figures(self, settings: Settings, fired: list[Fired], since: float) -> FleetFigures:
        """The report's `fleet`: per command, its worker events; the backlog; each fleet event's drain."""
        every = worker_events_between(connect(settings.ledger), since)
        events = [e for e in every if e.event in WORKER_EVENTS]
        queue_of = {e.identity: q for e in events if e.identity and (q := _queue(e.detail))}
        # a new version's workers (Worker Versioning) are its own command's, beside the old version's
        new = {v.build_id: v for v in settings.versions}
        newer = {e.identity for e in every if e.event == VERSION_EVENT and detail_text(e.detail, "build_id") in new}
        per_command: dict[tuple[str, bool], dict[str, int]] = {(q, False): {} for q in self.queues}
        for ev in events:
            key = (queue_of.get(ev.identity or "") or settings.task_queue, ev.identity in newer)
            counts = per_command.setdefault(key, {})
            counts[ev.event] = counts.get(ev.event, 0) + 1
        members = {(m.queue, False): m for m in settings.members}
        members.update({(v.queue, True): v for v in settings.versions})
        out = FleetFigures(commands=[_command(key[0], members.get(key), c) for key, c in per_command.items()])
        spans = [(f.kind, f.at, ended_at(f.at, f.detail)) for f in fired if f.kind in (*FLEET_KINDS, DEPENDENCY)]
        if self.backlog_path is not None:
            out.backlog = decode(Backlog, backlog_summary(read_samples(self.backlog_path), spans), "fleet.backlog")
            out.backlog_samples = str(self.backlog_path)
        if self.proxies:
            out.dependencies = {name: p.stats() for name, p in self.proxies.items()}
        out.models = self.models.figures()
        return out


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


SLOT_QUEUE = re.compile(r"\(slot \d+, ([^)]{1,200})\)")  # ops/pool_slots.where()


def _command(queue: str, member: FleetMember | None, events: dict[str, int]) -> CommandEvents:
    command = " ".join(member.cmd)[:300] if member is not None else "checkpoint_tui.worker"
    return CommandEvents(queue=queue, command=command, version=member.build_id if member else None, events=events)


def _queue(detail: str | None) -> str | None:
    """The queue a worker event names: a JSON detail's `queue`, or pool_slots.where()'s `(slot N, QUEUE)`."""
    if not detail:
        return None
    if detail.startswith("{"):
        return detail_text(detail, "queue")
    found = SLOT_QUEUE.search(detail[:4096])
    return found.group(1) if found else None


async def _fire(settings: Settings, ev: ChaosEvent, client: Client | None) -> Hit | Miss:
    """A fleet nemesis with the event's parameters (proof/nemeses/fleet.py), as fleet_events checked them."""
    opts = dict(ev.opts)
    queue = opts.get("queue")
    assert queue is None or isinstance(queue, str)

    def seconds(name: str, default: float | None) -> float | None:
        value = opts.get(name, default)
        return float(value) if isinstance(value, int | float) else None

    grace = seconds("grace_s", 10.0) or 0.0
    if ev.kind == fleet_nemeses.GRACEFUL:
        return await fleet_nemeses.graceful_restart(settings, queue, grace, client)
    if ev.kind == fleet_nemeses.FLEET_DOWN:
        return await fleet_nemeses.fleet_down(settings, queue, ev.duration_s or 1.0)
    if ev.kind == fleet_nemeses.CHURN:
        interval, fraction = seconds("interval_s", 2.0) or 2.0, seconds("fraction", 0.3) or 0.3
        return await fleet_nemeses.churn(settings, queue, ev.duration_s or 1.0, interval, fraction, grace, client)
    percent = seconds("ramp_percent", None)
    ramp = (percent, seconds("ramp_s", 2.0) or 0.0) if percent is not None else None
    return await fleet_nemeses.deploy(settings, queue, grace, seconds("rollback_after_s", None), client, ramp)
