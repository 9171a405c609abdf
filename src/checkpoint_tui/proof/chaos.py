"""`checkpoint-tui chaos --seed S --steps N --kills K`: a reproducible schedule of real SIGKILLs of
every process (the worker at different moments, the worker inside the claim->stamp window, the
supervisor, the Temporal dev server), then Jepsen-style counts from durable data only."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from checkpoint_tui.app.runs import start_run, wait_for_run
from checkpoint_tui.app.snapshot import build_snapshot
from checkpoint_tui.engine.shared import timer_ms
from checkpoint_tui.errors import Failed, UsageError
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.effects import KINDS
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.latency import measure
from checkpoint_tui.ledger.store import connect, record_worker_event
from checkpoint_tui.ops import devserver, worker_proc
from checkpoint_tui.ops.procs import send_signal_if_ours
from checkpoint_tui.ops.temporal import connect_client
from checkpoint_tui.proof.audit import Audit, audit_run
from checkpoint_tui.proof.bundle import ProofOutputs, ProofRun, emit
from checkpoint_tui.proof.report import Check
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until

WORKER_MOMENTS = ("worker-in-activity", "worker-between-activities", "worker-in-timer")
REQUIRED = ("claim-window-crash", "supervisor", "temporal-server")
PACE = 0.3
PROGRESS_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ChaosEvent:
    step: int
    kind: str
    delay_ms: int
    effect_kind: str | None = None


def make_schedule(seed: int, steps: int, kills: int) -> list[ChaosEvent]:
    """The same seed gives the same schedule. One event per step, none at the first or last step."""
    if kills < len(REQUIRED):
        raise UsageError(f"--kills must be at least {len(REQUIRED)} (claim window, supervisor, dev server)")
    if kills > steps - 2:
        raise UsageError(f"--kills {kills} needs --steps of at least {kills + 2}")
    rng = random.Random(seed)
    kinds = list(REQUIRED) + [rng.choice(WORKER_MOMENTS) for _ in range(kills - len(REQUIRED))]
    rng.shuffle(kinds)
    at = sorted(rng.sample(range(2, steps), kills))
    return [
        ChaosEvent(step, kind, rng.randrange(0, 120), rng.choice(KINDS) if kind == "claim-window-crash" else None)
        for step, kind in zip(at, kinds, strict=True)
    ]


class Chaos:
    def __init__(self, settings: Settings, seed: int, steps: int, kills: int) -> None:
        if not settings.embedded:
            raise UsageError("chaos kills the dev server, so it needs the embedded one (no --temporal-address)")
        self.settings = settings
        self.seed, self.steps = seed, steps
        self.schedule = make_schedule(seed, steps, kills)
        self.supervisor: asyncio.subprocess.Process | None = None
        self.kills: list[dict] = []

    async def spawn_supervisor(self) -> None:
        log = open(self.settings.run_dir / "chaos-supervisor.log", "ab")  # noqa: SIM115 - the child keeps it
        self.supervisor = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "checkpoint_tui", "--home", str(self.settings.home), "supervise",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log,
            env=self.settings.child_env(),
        )  # fmt: skip
        log.close()
        assert self.supervisor.stdout is not None
        line = await asyncio.wait_for(self.supervisor.stdout.readline(), 60)
        if not line.startswith(b"supervising"):
            raise Failed(f"the supervisor did not start; see {self.settings.run_dir / 'chaos-supervisor.log'}")

    async def run(self) -> dict:
        settings = self.settings
        started = time.monotonic()
        print(f"chaos seed={self.seed} steps={self.steps} schedule:", flush=True)
        for ev in self.schedule:
            extra = f" ({ev.effect_kind})" if ev.effect_kind else ""
            print(f"  step {ev.step:>4}: {ev.kind}{extra} +{ev.delay_ms} ms", flush=True)
        await self.spawn_supervisor()
        address = devserver.recorded(settings)[1]["address"]
        client = await connect_client(settings, address)
        plan = [FaultSpec("crash_after_claim", e.step, effect_kind=e.effect_kind) for e in self.schedule
                if e.kind == "claim-window-crash"]  # fmt: skip
        run_id = await start_run(settings, client, self.steps, PACE, plan)
        print(f"run {run_id}", flush=True)
        try:
            for ev in self.schedule:
                await self._fire(ev, run_id)
            status = await wait_for_run(settings, client, run_id, timeout=60 + self.steps * 5)
        finally:
            await self._stop_supervisor()
        conn = connect(settings.ledger)
        audit = audit_run(conn, settings, build_snapshot(conn, settings, run_id, status))
        return self._report(run_id, audit, time.monotonic() - started)

    async def _fire(self, ev: ChaosEvent, run_id: str) -> None:
        conn = connect(self.settings.ledger)
        if ev.kind == "claim-window-crash":
            await _until(lambda: queries.count_completed(conn, run_id) >= ev.step)  # the worker kills itself
            return
        if ev.kind in ("worker-in-activity", "supervisor", "temporal-server"):
            await _until(lambda: queries.activity_logged(conn, run_id, ev.step, "llm"))
        elif ev.kind == "worker-between-activities":
            await _until(lambda: queries.activity_logged(conn, run_id, ev.step, "effect"))
        else:  # in the timer after the step
            await _until(lambda: queries.count_completed(conn, run_id) >= ev.step)
            await asyncio.sleep(timer_ms(ev.step, PACE) / 1000 * ev.delay_ms / 120)
        await asyncio.sleep(ev.delay_ms / 1000 if ev.kind != "worker-in-timer" else 0)
        if ev.kind == "supervisor":
            await self._kill_supervisor(ev, run_id)
        elif ev.kind == "temporal-server":
            self._kill_devserver(ev, run_id)
        else:
            self._kill_worker(ev, run_id)

    def _kill_worker(self, ev: ChaosEvent, run_id: str) -> None:
        worker = worker_proc.load(self.settings, "active")
        if worker is None:
            return  # between a death and its replacement: nothing to kill this time
        at = time.time()
        if send_signal_if_ours(worker.ident, signal.SIGKILL):
            self._record(ev, run_id, worker.pid, at)

    async def _kill_supervisor(self, ev: ChaosEvent, run_id: str) -> None:
        assert self.supervisor is not None
        pid, at = self.supervisor.pid, time.time()
        self.supervisor.send_signal(signal.SIGKILL)  # our own child: no pid reuse before we reap it
        await self.supervisor.wait()
        self._record(ev, run_id, pid, at)
        await self.spawn_supervisor()  # a fresh supervisor adopts the worker

    def _kill_devserver(self, ev: ChaosEvent, run_id: str) -> None:
        ident, _ = devserver.recorded(self.settings)
        at = time.time()
        if ident is not None and send_signal_if_ours(ident, signal.SIGKILL):
            self._record(ev, run_id, ident.pid, at)

    def _record(self, ev: ChaosEvent, run_id: str, pid: int, at: float) -> None:
        record_worker_event(
            connect(self.settings.ledger), f"chaos:{ev.kind}", pid, None, run_id, ev.step,
            json.dumps({"seed": self.seed, "delay_ms": ev.delay_ms, "signal": "SIGKILL"}), at,
        )  # fmt: skip
        self.kills.append({"kind": ev.kind, "step": ev.step, "pid": pid, "at": at})

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
        crashes = len(queries.death_events(conn, run_id, kinds=("died",)))
        restarts = [k["restart_s"] for k in self.kills if k["restart_s"] is not None]
        return {
            "seed": self.seed,
            "steps": self.steps,
            "schedule": [asdict(e) for e in self.schedule],
            "audit": audit.to_dict(),
            "kills": self.kills,
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
        print(f"  kill {k['kind']:<26} step {k['step']:>4} pid {k['pid']:>7} -> run resumed after {r}")
    print(f"wall {report['wall_s']:.1f} s · verdict: {'PASS' if a['ok'] else 'FAIL'}")


async def chaos_command(
    settings: Settings, seed: int, steps: int, kills: int, json_path: Path | None, outputs: ProofOutputs | None = None
) -> int:
    settings.ensure_dirs()
    devserver.ensure_devserver(settings)
    report = await Chaos(settings, seed, steps, kills).run()
    checks = audit_checks(report["audit"])
    report["checks"] = [asdict(c) for c in checks]
    print_report(report)
    path = json_path or settings.run_dir / f"chaos-seed{seed}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")
    if outputs is not None and outputs.wanted:
        command = f"checkpoint-tui chaos --seed {seed} --steps {steps} --kills {kills}"
        figures = {"kills_fired": len(report["kills"]), "median_restart_s": report["median_restart_s"]}
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
