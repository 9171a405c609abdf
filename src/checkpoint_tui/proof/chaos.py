"""`checkpoint-tui chaos --seed S --steps N --kills K [--pauses P] [--partitions Q]`: a reproducible
schedule of real SIGKILLs of every process (the worker at different moments, the worker inside the
claim->stamp window, the supervisor, the Temporal dev server), SIGSTOPs of the worker and partitions
of the workers from Temporal (proof/nemeses.py), then Jepsen-style counts from durable data only. A
schedule can also come from a file (`--schedule`, proof/schedule.py; events at a step or at a time),
and a failing one be shrunk (`--shrink`, proof/shrink.py)."""

from __future__ import annotations

import asyncio
import json
import signal
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

from checkpoint_tui.app.runs import TERMINAL, start_run, wait_for_run
from checkpoint_tui.app.snapshot import build_snapshot
from checkpoint_tui.engine.shared import timer_ms
from checkpoint_tui.errors import Failed, Unavailable, UsageError
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.latency import measure
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import devserver, worker_proc
from checkpoint_tui.ops.temporal import connect_client
from checkpoint_tui.proof import nemeses
from checkpoint_tui.proof.audit import Audit, audit_run
from checkpoint_tui.proof.bundle import ProofOutputs, ProofRun, emit
from checkpoint_tui.proof.net_proxy import NetProxy
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.schedule import (  # noqa: F401 - REQUIRED and WORKER_MOMENTS are re-exported
    FORGE,
    PARTITION,
    PAUSES,
    REQUIRED,
    WORKER_MOMENTS,
    ChaosEvent,
    execute,
    load_schedule,
    make_schedule,
)
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until

PACE = 0.3
PROGRESS_TIMEOUT_S = 120.0
SIGNALS = {"pause": "SIGSTOP+SIGCONT", "hang": "SIGSTOP", FORGE: None, PARTITION: None}  # the rest: SIGKILL


class Chaos:
    def __init__(
        self, settings: Settings, seed: int | None, steps: int, kills: int = 0, pauses: int = 0,
        schedule: list[ChaosEvent] | None = None, partitions: int = 0,
    ) -> None:  # fmt: skip
        if not settings.embedded:
            raise UsageError("chaos kills the dev server, so it needs the embedded one (no --temporal-address)")
        self.settings = settings
        self.seed, self.steps = seed, steps
        self.schedule = schedule if schedule is not None else make_schedule(seed or 0, steps, kills, pauses, partitions)
        self.supervisor: asyncio.subprocess.Process | None = None
        self.kills: list[dict] = []  # SIGKILLs
        self.pauses: list[dict] = []  # pauses, hangs, partitions and forged writes
        self.not_fired: list[dict] = []  # at_s events the run did not live to see
        self.run_started_at = 0.0  # wall time the run started, as chaos saw it: at_s counts from here
        self._hung: list = []  # identities of hang victims: reaped at the end if the watchdog did not
        self.proxy: NetProxy | None = None  # between the workers and Temporal, for partitions

    async def spawn_supervisor(self) -> None:
        log = open(self.settings.run_dir / "chaos-supervisor.log", "ab")  # noqa: SIM115 - the child keeps it
        self.supervisor = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "checkpoint_tui", "--home", str(self.settings.home), *self.supervise_flags(),
            "supervise", stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log,
            env=self.settings.child_env(), cwd=self.settings.worker_cwd,
        )  # fmt: skip
        log.close()
        assert self.supervisor.stdout is not None
        line = await asyncio.wait_for(self.supervisor.stdout.readline(), 60)
        if not line.startswith(b"supervising"):
            raise Failed(f"the supervisor did not start; see {self.settings.run_dir / 'chaos-supervisor.log'}")

    def supervise_flags(self) -> list[str]:
        """Global flags for the supervisor process beyond --home (the rest travels in its environment)."""
        return []

    async def start_lab(self, header: str, unit: str = "step") -> str:
        """Print the schedule, put the network proxy between workers and Temporal if a partition is
        planned, start the supervisor; returns the dev server's address."""
        print(f"chaos seed={self.seed} {header} schedule:", flush=True)
        for ev in self.schedule:
            print(f"  {ev.describe().replace('step', unit, 1)}", flush=True)
        address = devserver.recorded(self.settings)[1]["address"]
        if any(ev.kind == PARTITION for ev in self.schedule):  # the workers reach Temporal through a proxy
            self.proxy = NetProxy(address)
            self.settings = replace(self.settings, worker_address=await self.proxy.start())
        await self.spawn_supervisor()
        return address

    async def run(self) -> dict:
        started = time.monotonic()
        address = await self.start_lab(f"steps={self.steps}")
        settings = self.settings
        client = await connect_client(settings, address)
        plan = [FaultSpec("crash_after_claim", e.step, effect_kind=e.effect_kind) for e in self.schedule
                if e.kind == "claim-window-crash"]  # fmt: skip
        run_id = await start_run(settings, client, self.steps, PACE, plan)
        self.run_started_at = time.time()
        print(f"run {run_id}", flush=True)
        try:
            await self._execute(run_id)
            status = await wait_for_run(settings, client, run_id, timeout=60 + self.steps * 5)
        finally:
            await self._stop_supervisor()
            nemeses.reap_hung(self._hung)
            if self.proxy is not None:  # its workers are bound to the proxy's address: they go with it
                for worker in worker_proc.load_all(settings):
                    worker_proc.stop(settings, worker)
                    worker_proc.forget(settings, worker.role, worker.slot)
                await self.proxy.close()
        conn = connect(settings.ledger)
        audit = audit_run(conn, settings, build_snapshot(conn, settings, run_id, status))
        return self._report(run_id, audit, time.monotonic() - started)

    async def _execute(self, run_id: str) -> None:
        """Every event of the schedule, each at its step or its time (schedule.execute)."""
        conn = connect(self.settings.ledger)

        async def closed() -> bool:
            try:
                row = queries.run(conn, run_id)
            except Unavailable:  # the ledger restarting: not closed; ask again
                return False
            return row is None or row.status in TERMINAL

        arrive, strike = (lambda ev: self._arrive(ev, run_id)), (lambda ev: self._strike(ev, run_id))
        left = await execute(self.schedule, arrive, strike, self.run_started_at, closed)
        self.not_fired += [{**ev.to_json(), "why": "the run completed first"} for ev in left]

    async def _arrive(self, ev: ChaosEvent, run_id: str) -> bool:
        """Wait for the step event's moment (its delay included); True: fire it."""
        conn = connect(self.settings.ledger)
        step = ev.step or 0
        if ev.kind == "claim-window-crash":
            await _until(lambda: queries.count_completed(conn, run_id) >= step)  # the worker kills itself
            return True
        if ev.kind in ("worker-in-activity", "supervisor", "temporal-server", PARTITION, *PAUSES):
            await _until(lambda: queries.activity_logged(conn, run_id, step, "llm"))
        elif ev.kind == "worker-between-activities":
            await _until(lambda: queries.activity_logged(conn, run_id, step, "effect"))
        else:  # in the timer after the step; a forged email: once the step's email is stamped
            await _until(lambda: queries.count_completed(conn, run_id) >= step)
            if ev.kind == "worker-in-timer":
                await asyncio.sleep(timer_ms(step, PACE) / 1000 * ev.delay_ms / 120)
        await asyncio.sleep(ev.delay_ms / 1000 if ev.kind != "worker-in-timer" else 0)
        return True

    async def _strike(self, ev: ChaosEvent, run_id: str) -> None:
        """Fire the event now (a claim-window crash fires itself: the worker's fault plan)."""
        if ev.kind == "claim-window-crash":
            return
        if ev.kind == "supervisor":
            await self._kill_supervisor(ev, run_id)
        elif ev.kind == PARTITION and self.proxy is not None:
            await self._partition(ev, run_id)
        elif ev.kind in (*PAUSES, FORGE):
            await self._stop_worker(ev, run_id)
        else:
            kill = nemeses.kill_devserver if ev.kind == "temporal-server" else nemeses.kill_worker
            if (fired := kill(self.settings)) is not None:
                self._record(ev, run_id, *fired)

    async def _partition(self, ev: ChaosEvent, run_id: str) -> None:
        assert self.proxy is not None
        at, seconds = time.time(), ev.duration_s or 1.0
        await self.proxy.partition(seconds)
        self._record(ev, run_id, None, at, {"healed_at": time.time(), "duration_s": seconds})

    async def _stop_worker(self, ev: ChaosEvent, run_id: str) -> None:
        """A pause (SIGSTOP, SIGCONT after its duration), a hang (SIGSTOP; the watchdog kills) or a forge."""
        conn = connect(self.settings.ledger)
        if ev.kind == FORGE:
            self._record(ev, run_id, None, nemeses.forge_duplicate_email(self.settings, conn, run_id, ev.step))
        elif ev.kind == "pause":
            paused = await nemeses.pause_worker(self.settings, ev.duration_s or 1.0)
            if paused is not None:
                self._record(ev, run_id, paused.pop("pid"), paused.pop("at"), paused)
        elif (hung := nemeses.hang_worker(self.settings)) is not None:
            ident, at = hung
            self._hung.append(ident)
            # the run cannot go on before the watchdog acts: wait for its kill (the next event may need it)
            await _until(lambda: nemeses.hang_kill_at(conn, ident.pid, at)[0] is not None, 30.0)
            killed_at, reason = nemeses.hang_kill_at(conn, ident.pid, at)
            self._record(ev, run_id, ident.pid, at, {"killed_at": killed_at, "watchdog": reason})

    async def _kill_supervisor(self, ev: ChaosEvent, run_id: str) -> None:
        assert self.supervisor is not None
        pid, at = self.supervisor.pid, time.time()
        self.supervisor.send_signal(signal.SIGKILL)  # our own child: no pid reuse before we reap it
        await self.supervisor.wait()
        self._record(ev, run_id, pid, at)
        await self.spawn_supervisor()  # a fresh supervisor adopts the worker

    def _record(self, ev: ChaosEvent, run_id: str, pid: int | None, at: float, extra: dict | None = None) -> None:
        sig = SIGNALS.get(ev.kind, "SIGKILL")
        if ev.at_s is not None:  # placed by time: say when it fired, and at which step the run was
            extra = {"at_s": ev.at_s, "fired_s": round(at - self.run_started_at, 3), **(extra or {})}
        step = ev.step if ev.step is not None else self.step_in_flight(run_id)
        detail = {"seed": self.seed, "delay_ms": ev.delay_ms, "signal": sig, **(extra or {})}
        record_worker_event(connect(self.settings.ledger), f"chaos:{ev.kind}", pid, None, run_id, step,
                            json.dumps(detail), at)  # fmt: skip
        fired = {"kind": ev.kind, "step": step, "pid": pid, "at": at, **(extra or {})}
        (self.kills if sig == "SIGKILL" else self.pauses).append(fired)

    def step_in_flight(self, run_id: str) -> int:
        """The step a time-placed event landed in: the first one not completed yet."""
        return min(queries.count_completed(connect(self.settings.ledger), run_id) + 1, self.steps)

    async def _stop_supervisor(self) -> None:
        if self.supervisor is not None and self.supervisor.returncode is None:
            self.supervisor.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.supervisor.wait(), 15)
            except TimeoutError:
                self.supervisor.kill()
                await self.supervisor.wait()

    def _report(self, run_id: str, audit: Audit, wall: float) -> dict:
        conn = connect(self.settings.ledger)
        for k in self.kills:
            if k["kind"].startswith("worker"):
                lat = measure(conn, run_id, k["at"], k["pid"], None)
                k["restart_s"] = lat.restart_s
            else:  # the run's next activity after the supervisor / dev server came back
                first = queries.first_activity_after(conn, run_id, k["at"])
                k["restart_s"] = None if first is None else first - k["at"]
            k["stalled_s"] = k["recovery_s"] = k["restart_s"]  # a kill ends when it lands
        crashes = len(queries.death_events(conn, run_id, kinds=("died",)))
        restarts = [k["restart_s"] for k in self.kills if k["restart_s"] is not None]
        return {
            "seed": self.seed,
            "steps": self.steps,
            "schedule": [e.to_json() for e in self.schedule],
            "run_started_at": self.run_started_at,
            "audit": audit.to_dict(),
            "kills": self.kills,
            "pauses": self.pauses,
            "not_fired": self.not_fired,
            "nemeses": nemeses.nemesis_figures(conn, run_id, [*self.kills, *self.pauses]),
            "worker_deaths_seen_by_supervisor": crashes,
            "median_restart_s": statistics.median(restarts) if restarts else None,
            "wall_s": wall,
        }


def print_report(report: dict) -> None:
    a = report["audit"]
    print(f"\nworkflow {a['workflow_status']} · steps {a['total_steps'] - len(a['step_gaps'])}/{a['total_steps']}")
    print(
        f"claims attempted {a['claims_attempted']} · applied {a['applied']} · skipped {a['skipped']} · "
        f"recovered {a['recovered']} · interrupted {a['interrupted']}"
    )
    print(f"LOST {a['lost']} · DUPLICATED {a['duplicated']} · step gaps {a['step_gaps']}")
    for detail in (a["lost_detail"] + a["duplicated_detail"])[:10]:
        print(f"  {detail}")
    for k in report["kills"]:
        r = "none" if k.get("restart_s") is None else f"{k['restart_s']:.2f} s"
        print(f"  kill {k['kind']:<26} {_where(k)} pid {k['pid']:>7} -> run resumed after {r}")
    for p in report["pauses"]:
        r = "none" if p.get("stalled_s") is None else f"{p['stalled_s']:.2f} s"
        if p.get("recovery_s") is not None and p["kind"] != FORGE:
            r += f" (next activity {p['recovery_s']:.2f} s after it ended)"
        how = f"for {p['duration_s']:.2f} s" if "duration_s" in p else (p.get("watchdog") or "")
        print(f"  {p['kind']:<31} {_where(p)} pid {p['pid'] or '-':>7} {how} -> run stalled {r}")
    for ev in report.get("not_fired", []):
        print(f"  not fired: {ev['nemesis']} at {ev['at_s']:.2f} s ({ev['why']})")
    for kind, f in report["nemeses"].items():
        med, top, back = (("—" if v is None else f"{v:.2f} s")
                          for v in (f["median_stall_s"], f["max_stall_s"], f["median_recovery_s"]))  # fmt: skip
        print(f"  {kind:<26} x{f['count']:<3} median stall {med} · max {top} · median after its end {back}")
    print(f"wall {report['wall_s']:.1f} s · verdict: {'PASS' if a['ok'] else 'FAIL'}")


def _where(fired: dict) -> str:
    """Where a fired nemesis landed: its step, and its time after the run started if placed by time."""
    at = f" (at {fired['fired_s']:.2f} s)" if "fired_s" in fired else ""
    return f"step {fired['step']:>4}{at}"


async def run_schedule(settings: Settings, seed: int | None, steps: int, events: list[ChaosEvent]) -> dict:
    """One chaos run of exactly these events, with its checks (what --schedule and --shrink run)."""
    report = await Chaos(settings, seed, steps, schedule=events).run()
    report["checks"] = [asdict(c) for c in audit_checks(report["audit"])]
    return report


async def chaos_command(
    settings: Settings, seed: int, steps: int, kills: int, json_path: Path | None, outputs: ProofOutputs | None = None,
    pauses: int = 0, schedule_file: Path | None = None, partitions: int = 0,
) -> int:  # fmt: skip
    settings.ensure_dirs()
    devserver.ensure_devserver(settings)
    events, command = None, f"checkpoint-tui chaos --seed {seed} --steps {steps} --kills {kills}"
    command += f" --pauses {pauses}" if pauses else ""
    command += f" --partitions {partitions}" if partitions else ""
    if schedule_file is not None:
        events, steps, file_seed = load_schedule(schedule_file, steps)
        seed, command = file_seed if file_seed is not None else seed, f"checkpoint-tui chaos --schedule {schedule_file}"
    if events is None:
        events = make_schedule(seed, steps, kills, pauses, partitions)
    report = await run_schedule(settings, seed, steps, events)
    checks = [Check(**c) for c in report["checks"]]
    print_report(report)
    path = json_path or settings.run_dir / f"chaos-seed{seed}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")
    if outputs is not None and outputs.wanted:
        figures = {"kills_fired": len(report["kills"]), "pauses_fired": len(report["pauses"]),
                   "median_restart_s": report["median_restart_s"]}  # fmt: skip
        run_ids = [report["audit"]["run_id"]]
        await emit(outputs, ProofRun(command, settings, report, checks, report["wall_s"], run_ids, figures))
    return 0 if report["audit"]["ok"] else 1


def audit_checks(a: dict) -> list[Check]:
    """The audit's verdict as checks (for --junit): it is ok exactly when all of them pass."""
    done = a["total_steps"] - len(a["step_gaps"])
    claims = (
        f"claims attempted {a['claims_attempted']} · applied {a['applied']} · skipped {a['skipped']} · "
        f"recovered {a['recovered']} · interrupted {a['interrupted']}"
    )
    lost = "".join(f"; {d}" for d in a["lost_detail"][:10])
    duplicated = "".join(f"; {d}" for d in a["duplicated_detail"][:10])
    return [
        Check("chaos: workflow COMPLETED", a["workflow_status"] == "COMPLETED",
              f"workflow {a['workflow_status']} · steps {done}/{a['total_steps']}"),
        Check("chaos: no lost effect", a["lost"] == 0, f"lost {a['lost']} · {claims}{lost}"),
        Check("chaos: no duplicated effect", a["duplicated"] == 0,
              f"duplicated {a['duplicated']} · {claims}{duplicated}"),
        Check("chaos: no step gaps", not a["step_gaps"], f"step gaps {a['step_gaps']}"),
    ]  # fmt: skip


async def _until(cond, timeout: float = PROGRESS_TIMEOUT_S) -> None:
    try:
        await wait_until(cond, timeout, every=0.01, what="chaos: the run's next event")
    except TimeoutError:
        raise Failed("chaos: the run stopped making progress (see run/worker.log, run/temporal.log)") from None
