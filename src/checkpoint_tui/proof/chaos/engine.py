"""`checkpoint-tui chaos --seed S --steps N --kills K [--pauses P] [--partitions Q]`: a reproducible
schedule of real SIGKILLs of every process (the worker at different moments, the worker inside the
claim->stamp window, the supervisor, the Temporal dev server), SIGSTOPs of the worker and partitions
of the workers from Temporal (proof/nemeses/processes.py), then Jepsen-style counts from durable data only. A
schedule can also come from a file (`--schedule`, proof/chaos/schedule.py; events at a step or at a time),
and a failing one be shrunk (`--shrink`, proof/chaos/shrink.py).

One engine for every workload (core/workload.py): what differs between our AgentLoop and a user's
workflow is a *target* (proof/chaos/loop_target.py, proof/chaos/workflow_target.py) that says when an event's
moment has come, fires what only that workload has, audits the run and turns the audit into checks."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from temporalio.client import Client

from checkpoint_tui.core.audit import Audit
from checkpoint_tui.core.lost_work import LAB_WIDE
from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import chaos_supervisor, codec_client, fleet, worker_proc
from checkpoint_tui.ops.temporal import connect_client, lab_address
from checkpoint_tui.proof.chaos import kill_windows
from checkpoint_tui.proof.chaos.fleet_events import CHURN, DEPENDENCY, DEPLOY, GRACEFUL
from checkpoint_tui.proof.chaos.fleet_lab import FleetLab
from checkpoint_tui.proof.chaos.kill_windows import Placement
from checkpoint_tui.proof.chaos.model_outcome import annotate
from checkpoint_tui.proof.chaos.placements import place_deaths
from checkpoint_tui.proof.chaos.printing import place_word
from checkpoint_tui.proof.chaos.run_starts import RunStarts
from checkpoint_tui.proof.chaos.run_totals import totals
from checkpoint_tui.proof.chaos.schedule import FORGE, PARTITION, PAUSES, ChaosEvent, execute, refuse_server_kills
from checkpoint_tui.proof.chaos.supervisor_child import SupervisorChild
from checkpoint_tui.proof.chaos.targets import ChaosTarget, Handled, until
from checkpoint_tui.proof.chaos.touched import Touch, spread, through_kills
from checkpoint_tui.proof.chaos.workflow_checks import converter_check
from checkpoint_tui.proof.nemeses import processes as nemeses
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_NEMESES
from checkpoint_tui.proof.nemeses.handed import Handed, by_token
from checkpoint_tui.proof.nemeses.hop import HOP_KINDS, Hop
from checkpoint_tui.proof.nemeses.model_faults import FAULTS as MODEL_FAULTS
from checkpoint_tui.proof.nemeses.net_proxy import NetProxy
from checkpoint_tui.proof.nemeses.records import NO_WORKER, Fired, Hit, Miss, NotFired
from checkpoint_tui.proof.nemeses.resets import RESET
from checkpoint_tui.proof.report.audit import audit_record
from checkpoint_tui.proof.report.chaos import ChaosReport, RunRecord, TemporalRecord, TouchedFigures
from checkpoint_tui.proof.report.codec import JsonObject
from checkpoint_tui.settings import Settings

FIRST_WORKER_S = 30.0
# After a deploy (and its rollback), a workflow task may fail for a while and then go through: the task
# a stopped new-version worker held is retried after its workflow task timeout (10 s by default).
STUCK_PATIENCE_S = 30.0
SIGNALS = {
    "pause": "SIGSTOP+SIGCONT",
    "hang": "SIGSTOP",
    FORGE: None,
    PARTITION: None,
    RESET: None,
    **dict.fromkeys(ACTIVITY_NEMESES),
    **dict.fromkeys((GRACEFUL, CHURN, DEPLOY), "SIGTERM"),
    DEPENDENCY: None,
    **dict.fromkeys(MODEL_FAULTS),
}  # else SIGKILL (a fleet-down too)


class Chaos:
    def __init__(
        self,
        settings: Settings,
        seed: int | None,
        steps: int,
        schedule: list[ChaosEvent],
        target: ChaosTarget,
        runs: int = 1,
        rate: float | None = None,
    ) -> None:
        refuse_server_kills(schedule, settings, None)  # a server the lab did not start is never killed
        self.fleet = FleetLab(settings, schedule)  # its events checked against the fleet before anything starts
        self.rate = rate  # runs started per second (load); None: all at once
        self.settings = settings
        self.address, self.embedded = "", settings.embedded  # the Temporal it runs against (start_lab)
        self.seed, self.steps = seed, steps  # steps: the units the schedule is placed over
        self.schedule = schedule
        self.target = target
        self.supervisor = SupervisorChild()  # the supervisor process beside chaos (supervisor_child.py)
        self._supervisor_kills = sum(ev.kind == "supervisor" for ev in schedule)  # each but the last: a standby
        self._supervisor_events = 0  # of those, met so far
        self.kills: list[Fired] = []  # SIGKILLs
        self.pauses: list[Fired] = []  # pauses, hangs, partitions, forged writes, activity pauses and resets
        self.resets: list[Fired] = []  # workflow resets (proof/nemeses/resets.py)
        self._client: Client | None = None  # the Temporal client of the run (a reset is a request to it)
        self.runs = runs  # concurrent runs under the one schedule (the first, the lead, places its events)
        self.run_ids: list[str] = []
        self.not_fired: list[NotFired] = []  # events the run did not live to see, or that found nothing to hit
        self.kill_windows: list[Placement] = []  # each worker death of every run with its window (windows.py)
        self.touched: list[Touch] = []  # each run a worker death touched, and how soon it went on (touched.py)
        self.run_started_at = 0.0  # wall time the run started, as chaos saw it: at_s counts from here
        self._hung: list = []  # identities of hang victims: reaped at the end if the watchdog did not
        self.proxy: NetProxy | None = None  # between the workers and Temporal, for partitions
        self.hop: Hop | None = None  # between the workers and Temporal, for crash points (nemeses/hop.py)
        self._closed: set[str] = set()  # runs other than the lead seen ended
        self._events: dict[int, JsonObject] = {}  # each Fired's schedule event
        self.say_schedule = True  # each event printed before the run (--every-window says its rounds instead)
        self._others_asked = 0.0

    @property
    def client(self) -> Client:
        """The run's Temporal client, connected as the run starts."""
        if self._client is None:
            raise RuntimeError("chaos: the Temporal client is not connected before the run starts")
        return self._client

    def supervise_flags(self) -> list[str]:
        """Global flags for the supervisor process beyond --home (the rest travels in its environment):
        the workload's workers, the task queue they poll, the pool's size (always: left out, the supervisor
        would take its own default, 2 for a node worker where 1 was asked) and --no-spare if given."""
        flags = [*self.target.workload.command_flags(self.settings)[0], "--task-queue", self.settings.task_queue]
        flags += self.settings.server_flags()  # a server the lab did not start: the supervisor's too
        flags += ["--workers", str(self.settings.pool_size)]
        return flags + ([] if self.settings.spare else ["--no-spare"])

    async def start_lab(self, header: str) -> str:
        """Print the schedule, put the network proxy between workers and Temporal if a partition is
        planned, start the supervisor; returns the dev server's address."""
        print(f"chaos seed={self.seed} {header} schedule:", flush=True)
        for ev in self.schedule if self.say_schedule else []:
            print(f"  {ev.describe(place_word(self.target.workload.unit), self.target.workload.units)}", flush=True)
        self.address = address = lab_address(self.settings)  # the dev server found or started before, or theirs
        self.settings = await self.fleet.start(self.settings, self.target.http_logs(self))  # --dependency proxies
        if any(ev.kind == PARTITION for ev in self.schedule):  # the workers reach Temporal through a proxy
            self.proxy = NetProxy(address)
            self.settings = replace(self.settings, worker_address=await self.proxy.start())
        if (hop := self.target.hop(self, self.settings.worker_address or address)) is not None:
            self.hop = hop  # the workers reach Temporal (or the proxy) through the hop, which sees who holds what
            hop.handed = Handed(self.settings, by_token(lambda: self.client), lambda: self.client)
            self.supervisor.attempts_by_hop = True  # the hop fails them: the supervisor resets sticky queues only
            # with TLS to the cluster the hop ends the workers' TLS and speaks it upstream: they reach it plain
            self.settings = replace(self.settings, worker_address=await hop.start(), worker_plaintext=bool(hop.tls))
        if self.hop or self.proxy:  # a running lab's workers reach Temporal around them: replaced
            await asyncio.to_thread(chaos_supervisor.replace_direct_workers, self.settings)
        await self.supervisor.spawn(self.settings, self.supervise_flags(), standby=self._supervisor_kills > 0)
        return address

    async def run(self) -> ChaosReport:
        started = time.monotonic()
        target = self.target
        before = await asyncio.to_thread(target.read_destinations, self)  # where the effects land, before the run
        try:  # from the first process it starts on, whatever ends the run stops what chaos started
            address = await self.start_lab(target.header(self))
            settings = self.settings
            client = self._client = await connect_client(settings, address)
            await self._worker_ready(client)  # a worker that cannot start: one line, exit 3
            # all on the same workers: one kill interrupts every run they serve
            starts = RunStarts(self.run_ids, self.runs, self.rate, lambda: target.start(self, client))
            run_id = await starts.lead()  # its activities place the events
            await self.fleet.sample(settings, client, run_id, load=bool(self.rate))  # the backlog
            self.run_started_at = time.time()
            print(f"run {run_id}", flush=True)
            starts.start_others()  # beside the events, which must meet runs in flight
            try:
                await self._execute(run_id)
            finally:
                await starts.finish(ok=sys.exc_info()[0] is None)
            bound = 60 + target.span(self) * 5 * self.runs
            patience = STUCK_PATIENCE_S if any(e.kind == DEPLOY for e in self.schedule) else 0.0
            waits = [
                target.workload.wait(settings, client, r, timeout=bound, patience_s=patience) for r in self.run_ids
            ]
            statuses = await asyncio.gather(*waits)
            await self.fleet.settle()  # a backlog that drained as the last runs closed, read as drained
        finally:
            settings = self.settings
            await self.supervisor.stop(self.settings)
            nemeses.reap_hung(self._hung)
            if self.proxy or self.hop or not target.workload.keeps_workers:  # bound to the proxy or hop; a user's
                for worker in worker_proc.load_all(settings):
                    worker_proc.stop(settings, worker)
                    worker_proc.forget(settings, worker.role, worker.slot)
            if self.proxy is not None:
                await self.proxy.close()
            if self.hop is not None:
                await self.hop.close()
            await self.fleet.close(settings)
        await target.at_destination(self, before)  # every worker has stopped; the audits read it
        audits = [await target.audit(self, r, st) for r, st in zip(self.run_ids, statuses, strict=True)]
        conn, probe = connect(settings.ledger), target.probe(self)
        ended = target.ended_at(self)
        # where each worker death landed, and the runs it touched, from history and the claim attempts
        placed, self.touched = await place_deaths(self, target, conn, probe, ended)
        self.kill_windows += placed
        self._after_close(ended)
        return self._report(run_id, audits, time.monotonic() - started)

    def _after_close(self, ended: float | None) -> None:
        """What fired after every run had closed (between the last look and the signal) did not happen to
        the run: listed as not fired, with how late it came, never counted as a kill or a pause."""
        if ended is None:
            return
        for fired in [f for f in (*self.kills, *self.pauses) if f.at > ended]:
            (self.kills if fired in self.kills else self.pauses).remove(fired)
            why = f"fired {fired.at - ended:.2f} s after the run closed: not counted"
            self.not_fired.append(NotFired(self._events.get(id(fired), {"nemesis": fired.kind}), why))

    async def _worker_ready(self, client: Client, timeout: float = FIRST_WORKER_S) -> None:
        """The supervisor process's first worker can take a run (it may be between a death and a respawn)."""
        deadline = time.monotonic() + timeout
        while (worker := worker_proc.load(self.settings, "active")) is None:
            if time.monotonic() > deadline:
                log = self.settings.run_dir / "worker.log"
                raise Unavailable(f"the supervisor's worker did not stay up for {timeout:g} s; see {log}")
            await asyncio.sleep(0.1)
        await self.target.workload.ready(self.settings, client, worker)

    async def _execute(self, run_id: str) -> None:
        """Every event of the schedule, each at its moment or its time (schedule.execute)."""
        said: set[int] = set()  # ids of events whose arrival already said why they did not fire

        async def arrive(ev: ChaosEvent) -> bool:
            if (why := await self.target.arrive(self, ev, run_id)) is not None:
                self.not_fired.append(NotFired(ev.to_json(), why))
                said.add(id(ev))
                return False
            return True

        left = await execute(
            self.schedule, arrive, lambda ev: self.fire(ev, run_id), self.run_started_at, self._all_closed
        )
        self.not_fired += [NotFired(ev.to_json(), "the run completed first") for ev in left if id(ev) not in said]

    async def _all_closed(self) -> bool:
        """Every run ended (time events go on while any run of the same workers is open): the lead is
        asked each time, the others at most once a second (reading each one's history is not free)."""
        if len(self.run_ids) < self.runs or not await self.target.closed(self, self.run_ids[0]):
            return False  # a run still to start, or the lead open
        if time.monotonic() - self._others_asked >= 1.0:
            self._others_asked = time.monotonic()
            for r in self.run_ids[1:]:
                if r not in self._closed and await self.target.closed(self, r):
                    self._closed.add(r)
        return len(self._closed) == len(self.run_ids) - 1

    async def fire(self, ev: ChaosEvent, run_id: str) -> None:
        """Fire the event now: what only the workload has is its target's, the rest the engine's. One that
        finds nothing to hit (between a death and its replacement, say) is listed as not fired, with why."""
        # An event whose moment never came is not a kill (nor a pause). An in-activity one just saw its activity
        # running: a history read now would only delay it (one that came too late is dropped after the run).
        inside = ev.kind in ("worker-in-activity", *HOP_KINDS) or ev.kind in ACTIVITY_NEMESES
        if not inside and self.run_ids and await self._all_closed():
            self.not_fired.append(NotFired(ev.to_json(), "the run closed before it fired"))
            return
        self.target.striking(self, ev, run_id)
        done: Hit | Miss | Handled | None = await self.target.strike(self, ev, run_id)
        if done is Handled.NOT_MINE:
            done = await self._strike(ev, run_id)
        if isinstance(done, Miss):
            self.not_fired.append(NotFired(ev.to_json(), done.why))
        elif isinstance(done, Hit):
            self._record(ev, run_id, done)

    async def _strike(self, ev: ChaosEvent, run_id: str) -> Hit | Miss | None:
        """Fire what every workload has: a kill or a pause of its worker, of the supervisor or of the dev
        server, a partition, a game day's fleet and dependency nemeses. None: recorded already."""
        if (fleet_hit := await self.fleet.strike(self.settings, ev)) is not None:
            return fleet_hit
        if ev.kind == "supervisor":
            return await self._kill_supervisor(ev, run_id)
        if ev.kind == PARTITION and self.proxy is not None:
            return await self._partition(ev)
        if ev.kind in PAUSES:
            return await self._stop_worker(ev)
        if ev.kind == "temporal-server":
            return nemeses.kill_devserver(self.settings) or Miss("no dev server of this home was running")
        return nemeses.kill_active_worker(self.settings) or Miss(NO_WORKER)

    async def _partition(self, ev: ChaosEvent) -> Hit:
        assert self.proxy is not None
        at, seconds = time.time(), ev.duration_s or 1.0
        await self.proxy.partition(seconds)
        return Hit(at, detail={"healed_at": time.time(), "duration_s": seconds})

    async def _stop_worker(self, ev: ChaosEvent) -> Hit | Miss:
        """A pause (SIGSTOP, SIGCONT after its duration) or a hang (SIGSTOP; the watchdog kills)."""
        if ev.kind == "pause":
            return await nemeses.pause_worker(self.settings, ev.duration_s or 1.0) or Miss(NO_WORKER)
        if (hung := nemeses.hang_worker(self.settings)) is None:
            return Miss(NO_WORKER)
        ident, at = hung
        self._hung.append(ident)
        # the run cannot go on before the watchdog acts: wait for its kill (the next event may need it)
        conn = connect(self.settings.ledger)
        await until(lambda: nemeses.hang_kill_at(conn, ident.pid, at)[0] is not None, 30.0)
        killed_at, reason = nemeses.hang_kill_at(conn, ident.pid, at)
        return Hit(at, ident.pid, detail={"killed_at": killed_at, "watchdog": reason})

    async def _kill_supervisor(self, ev: ChaosEvent, run_id: str) -> Miss | None:
        self._supervisor_events += 1
        more = self._supervisor_kills > self._supervisor_events
        if (hit := await self.supervisor.kill()) is not None:
            self._record(ev, run_id, hit)  # before its successor's own events
        await self.supervisor.succeed(self.settings, self.supervise_flags(), standby=more)  # it adopts the workers
        return None if hit is not None else Miss("the supervisor had ended on its own; its standby took over")

    def _record(self, ev: ChaosEvent, run_id: str, hit: Hit) -> None:
        """The event as fired: in the ledger's worker events (the app's markers read them) and the report."""
        sig = SIGNALS.get(ev.kind, "SIGKILL")
        extra: dict[str, Any] = {"identity": hit.identity} if hit.identity is not None else {}
        if ev.at_s is not None:  # placed by time: say when it fired, and at which unit the run was
            extra.update(at_s=ev.at_s, fired_s=round(hit.at - self.run_started_at, 3))
        extra = {**self.target.landing(ev), **extra, **hit.detail}  # where it landed, as the target saw it
        step = extra.pop("step", None) or (ev.step if ev.step is not None else self.target.in_flight(self, run_id))
        detail = {"seed": self.seed, "delay_ms": ev.delay_ms, "signal": sig, **extra}
        if f"chaos:{ev.kind}" in LAB_WIDE:  # it reached every run on this lab's queues (no other lab's)
            detail["queues"] = fleet.queues(self.settings)
        record_worker_event(
            connect(self.settings.ledger), f"chaos:{ev.kind}", hit.pid, None, run_id, step, json.dumps(detail), hit.at
        )
        fired = Fired(ev.kind, step, hit.pid, hit.at, extra)
        self._events[id(fired)] = ev.to_json()
        (self.kills if sig == "SIGKILL" else self.resets if ev.kind == RESET else self.pauses).append(fired)
        if sig == "SIGKILL" and self.hop is not None:  # a worker's: the attempts it held fail now (handed.py)
            self.hop.killed(hit)

    def _touched(self) -> TouchedFigures | None:
        if not self.touched:
            return None
        resumed = [t.resumed_s for t in self.touched if t.resumed_s is not None]
        return TouchedFigures(
            touches=len(self.touched),
            runs=len({t.run_id for t in self.touched}),
            next_attempt=spread([t.next_attempt_s for t in self.touched]),
            resumed=spread(resumed) if resumed else {},
            through_server_kill=through_kills(self.touched, [k.at for k in self.kills if k.kind == "temporal-server"]),
        )

    def _report(self, run_id: str, audits: list[Audit], wall: float) -> ChaosReport:
        """The report: what every workload has, then its target's own figures (and its checks). With
        several runs, the lead's audit is `audit`, every run's is in `runs` with its checks, and the
        checks are every run's (named by run)."""
        target = self.target
        target.stalls(self, run_id)
        figures = target.figures(self, run_id)  # before the records are written out: it completes them
        restarts = [k.restart_s for k in self.kills if k.restart_s is not None]
        records = [audit_record(a) for a in audits]
        report = ChaosReport(
            seed=self.seed,
            workload=target.workload.kind,
            unit=target.workload.unit,
            steps=self.steps,
            run_id=run_id,
            schedule=[e.to_json() for e in self.schedule],
            run_started_at=self.run_started_at,
            audit=records[0],
            kills=list(self.kills),
            pauses=list(self.pauses),
            resets=list(self.resets),
            not_fired=list(self.not_fired),
            median_restart_s=statistics.median(restarts) if restarts else None,
            wall_s=wall,
            windows=kill_windows.window_counts(self.kill_windows),
            kill_windows=list(self.kill_windows),
            figures=figures,
            fleet=self.fleet.figures(self.settings, [*self.kills, *self.pauses], self.run_started_at),
            temporal=self._cluster(),
            touched=self._touched() if len(self.run_ids) > 1 else None,
        )
        if report.fleet is not None:
            annotate(report.fleet.models, audits, [k.at for k in self.kills])  # what the agent did, per fault
        unread = converter_check(self._client)  # a payload the team's converter could not read: said, not guessed
        if len(audits) == 1:
            report.checks = target.checks(audits[0]) + unread
            return report
        report.runs = [
            RunRecord(run_id=r, audit=record, checks=target.checks(a))
            for r, a, record in zip(self.run_ids, audits, records, strict=True)
        ]
        report.totals = totals(records)
        report.checks = [replace(c, name=f"{c.name} ({r.run_id})") for r in report.runs for c in r.checks] + unread
        return report

    def _cluster(self) -> TemporalRecord:
        converter, undecodable, _ = codec_client.said(self._client)
        return TemporalRecord(
            address=self.address,
            namespace=self.settings.namespace,
            started_by_lab=self.embedded,
            data_converter=converter,
            undecodable_payloads=undecodable if converter else None,
        )
