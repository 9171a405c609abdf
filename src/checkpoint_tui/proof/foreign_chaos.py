"""`checkpoint-tui --worker-cmd CMD chaos --workflow TYPE --input JSON --seed S --kills K`: the chaos
schedule run against a user's own worker and workflow, then the foreign audit (proof/foreign_audit.py).

The schedule is the seeded one of proof/schedule.py over *activities* instead of steps: an event
"at step k" fires at the workflow's k-th activity in scheduling order, read from Temporal history and
the workflow's pending activities (a foreign run has no step rows). A user's worker has no fault
hooks and the lab knows none of its timers, so two seeded moments are mapped: a claim-window crash
becomes a kill inside the activity, a kill in a timer a kill between activities. Supervisor, dev
server, pause, hang and partition events apply as they are, placed by activity or, from a schedule
file, by time (`at_s`, seconds after the run started; the same executor as ours, schedule.execute).
The supervisor is a separate `supervise --worker-cmd ...` process (it is killed too); the worker
command it started is stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from checkpoint_tui.app.foreign_history import ActivityExec, Chain, activities, first_event_after, read_chain
from checkpoint_tui.app.foreign_history import with_pending as add_pending
from checkpoint_tui.app.foreign_runs import start_foreign_run, wait_foreign
from checkpoint_tui.errors import Failed, Unavailable, UsageError
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import devserver, worker_proc
from checkpoint_tui.ops.foreign_worker import probe_log_path, wait_polling
from checkpoint_tui.ops.temporal import connect_client
from checkpoint_tui.proof import nemeses
from checkpoint_tui.proof.chaos import Chaos
from checkpoint_tui.proof.foreign_audit import ForeignAudit, audit_foreign, audit_lines, probe_counts
from checkpoint_tui.proof.junit import write_junit
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.schedule import FORGE, PARTITION, PAUSES, ChaosEvent, execute, load_schedule, make_schedule
from checkpoint_tui.settings import Settings

# What a seeded moment becomes against a user's worker (no claim-window fault hook, no known timers).
MAPPED = {"claim-window-crash": "worker-in-activity", "worker-in-timer": "worker-between-activities"}
POLL_S = 0.03  # an activity of the example lasts ~pace seconds: look often enough to land inside it
CLOSED_POLL_S = 0.25  # waiting for a time event: how often to read the history for the workflow's end
PROGRESS_TIMEOUT_S = 120.0


def foreign_schedule(
    seed: int, activities_span: int, kills: int, pauses: int = 0, partitions: int = 0
) -> list[ChaosEvent]:
    """The seeded schedule (same seed, same places) with the mapped moments."""
    if kills < 3:
        raise UsageError("--kills must be at least 3 (inside an activity, the supervisor, the dev server)")
    return [map_event(e) for e in make_schedule(seed, activities_span, kills, pauses, partitions)]


def map_event(ev: ChaosEvent) -> ChaosEvent:
    if ev.kind == FORGE:
        raise UsageError(f"{FORGE} forges our own outbox; a user's workflow has none")
    if ev.kind in MAPPED:
        return replace(ev, kind=MAPPED[ev.kind], effect_kind=None)
    return ev


class Progress:
    """The run as Temporal has it: activities in scheduling order (open ones with their pending state)."""

    def __init__(self, client: Client, run_id: str) -> None:
        self.client, self.run_id = client, run_id
        self.chain = Chain(run_id)
        self.acts: list[ActivityExec] = []
        self.closed = False

    async def refresh(self) -> None:
        try:
            self.chain = await read_chain(self.client, self.run_id)
            self.acts = await add_pending(self.client, self.chain, activities(self.chain))
            last = self.chain.executions[-1][1] if self.chain.executions else []
            self.closed = bool(last) and _closes(last[-1])
        except RPCError:  # the dev server restarting (a nemesis): look again
            pass

    def activity(self, k: int) -> ActivityExec | None:
        return self.acts[k - 1] if len(self.acts) >= k else None


def _closes(ev) -> bool:
    return any(
        ev.HasField(f"workflow_execution_{what}_event_attributes")
        for what in ("completed", "failed", "timed_out", "canceled", "terminated")
    )


async def until_activity(
    progress: Progress, k: int, running_on: Callable[[], str | None] | None, timeout: float = PROGRESS_TIMEOUT_S
) -> bool:
    """Wait until the k-th activity is in flight on the worker `running_on()` names (not on a dead one
    whose attempt Temporal has not failed yet), or closed (with `running_on` None: only closed). False
    if the workflow closed before it came."""
    deadline = time.monotonic() + timeout
    while True:
        await progress.refresh()
        act = progress.activity(k)
        if act is not None and act.closed_at is not None:  # between activities; or too late to land inside
            return True
        on_live = running_on is not None and act is not None and act.status == "running"
        if on_live and act.identity is not None and act.identity == running_on():  # type: ignore[misc]
            return True
        if progress.closed:
            return False
        if time.monotonic() > deadline:
            raise Failed("the run stopped making progress (see run/worker.log, run/temporal.log)")
        await asyncio.sleep(POLL_S)


async def _first_worker_polling(client: Client, settings: Settings, timeout: float = 30.0) -> None:
    """The supervisor process's first worker, polling (it may be between a death and a respawn)."""
    deadline = time.monotonic() + timeout
    while (worker := worker_proc.load(settings, "active")) is None:
        if time.monotonic() > deadline:
            raise Unavailable(f"the worker command did not stay up; see {settings.run_dir / 'worker.log'}")
        await asyncio.sleep(POLL_S)
    await wait_polling(client, settings, worker, timeout)


def _live_name(settings: Settings) -> str | None:
    live = worker_proc.load(settings, "active")
    return live.name if live is not None else None


class ForeignChaos(Chaos):
    def __init__(
        self, settings: Settings, seed: int | None, span: int, schedule: list[ChaosEvent], workflow: str, arg: Any
    ) -> None:
        super().__init__(settings, seed, span, schedule=schedule)
        self.workflow, self.arg = workflow, arg
        self.skipped: list[dict] = []  # events whose activity (or time) never came: the workflow ended first
        self.progress: Progress | None = None

    def supervise_flags(self) -> list[str]:
        return ["--worker-cmd", shlex.join(self.settings.worker_cmd), "--task-queue", self.settings.task_queue]

    async def run(self) -> dict:
        started = time.monotonic()
        address = await self.start_lab(f"workflow={self.workflow} activities={self.steps}", unit="activity")
        settings = self.settings
        try:
            client = await connect_client(settings, address)
            await _first_worker_polling(client, settings)  # a command that cannot start: one line, exit 3
            run_id = await start_foreign_run(settings, client, self.workflow, self.arg)
            self.run_started_at = time.time()
            print(f"run {run_id}", flush=True)
            progress = Progress(client, run_id)
            await self._execute_foreign(run_id, progress)
            status = await wait_foreign(settings, client, run_id, timeout=60 + self.steps * 5)  # writes its end
        finally:
            await self._stop_supervisor()
            nemeses.reap_hung(self._hung)
            for worker in worker_proc.load_all(settings):  # the user's worker command: ours to stop
                worker_proc.stop(settings, worker)
                worker_proc.forget(settings, worker.role, worker.slot)
            if self.proxy is not None:
                await self.proxy.close()
        await progress.refresh()
        probes = probe_counts(probe_log_path(settings))
        audit = audit_foreign(connect(settings.ledger), run_id, self.workflow, status, progress.acts, probes)
        return self._foreign_report(run_id, audit, progress.chain, time.monotonic() - started)

    async def _execute_foreign(self, run_id: str, progress: Progress) -> None:
        """Every event, at its activity or its time (schedule.execute, as for our own workflow)."""
        self.progress = progress

        async def closed() -> bool:
            await progress.refresh()
            return progress.closed

        arrive, strike = (lambda ev: self._arrive_at(ev, progress)), (lambda ev: self._strike_foreign(ev, run_id))
        left = await execute(self.schedule, arrive, strike, self.run_started_at, closed, CLOSED_POLL_S)
        self.skipped += [{**ev.to_json(), "why": "the workflow closed first"} for ev in left]

    async def _arrive_at(self, ev: ChaosEvent, progress: Progress) -> bool:
        """Wait for the event's activity (running; closed for a kill between activities); False if the
        workflow closed before it came."""
        between = ev.kind == "worker-between-activities"
        live = None if between else (lambda: _live_name(self.settings))
        if not await until_activity(progress, ev.step or 0, live):
            why = f"the workflow closed after {len(progress.acts)} activities"
            self.skipped.append({**ev.to_json(), "why": why})
            return False
        await asyncio.sleep(ev.delay_ms / 1000)
        return True

    def step_in_flight(self, run_id: str) -> int:
        """The activity a time-placed event landed in: the latest one scheduled."""
        return max(len(self.progress.acts), 1) if self.progress is not None else 1

    async def _strike_foreign(self, ev: ChaosEvent, run_id: str) -> None:
        if ev.kind in ("worker-in-activity", "worker-between-activities"):
            fired = kill_foreign_worker(self.settings)
            if fired is not None:
                self._record(ev, run_id, fired[0], fired[1], {"identity": fired[2]})
        elif ev.kind == "supervisor":
            await self._kill_supervisor(ev, run_id)
        elif ev.kind == "temporal-server":
            if (fired_ds := nemeses.kill_devserver(self.settings)) is not None:
                self._record(ev, run_id, *fired_ds)
        elif ev.kind == PARTITION and self.proxy is not None:
            await self._partition(ev, run_id)
        elif ev.kind in PAUSES:
            await self._stop_worker(ev, run_id)

    def _foreign_report(self, run_id: str, audit: ForeignAudit, chain: Chain, wall: float) -> dict:
        for fired in [*self.kills, *self.pauses]:
            after = fired.get("cont_at") or fired.get("killed_at") or fired.get("healed_at") or fired["at"]
            nxt = first_event_after(chain, after, fired.get("identity"))
            fired["stalled_s"] = fired["restart_s"] = None if nxt is None else nxt - fired["at"]
        restarts = [k["restart_s"] for k in self.kills if k.get("restart_s") is not None]
        report = {
            "seed": self.seed, "activities": self.steps, "workflow": self.workflow, "run_id": run_id,
            "schedule": [e.to_json() for e in self.schedule], "not_fired": self.skipped,
            "foreign_audit": audit.to_dict(), "kills": self.kills, "pauses": self.pauses,
            "median_restart_s": statistics.median(restarts) if restarts else None, "wall_s": wall,
        }  # fmt: skip
        report["checks"] = [asdict(c) for c in foreign_checks(audit)]
        return report


def kill_foreign_worker(settings: Settings) -> tuple[int, float, str] | None:
    """SIGKILL the active worker (identity-checked, with its process group): (pid, when, identity)."""
    worker = worker_proc.load(settings, "active")
    at = time.time()
    if worker is not None and worker.send(signal.SIGKILL):
        return worker.pid, at, worker.name
    return None


def foreign_checks(a: ForeignAudit) -> list[Check]:
    """The verdict as checks: it passes exactly when all of them do."""
    risky = "; ".join(f"#{r['seq']} {r['type']} attempt {r['attempt']}" for r in a.at_risk[:10])
    return [
        Check("chaos: workflow COMPLETED", a.workflow_status == "COMPLETED",
              f"workflow {a.workflow_status} · activities {a.completed}/{a.activities}"),
        Check("chaos: no lost effect", a.lost == 0, f"lost {a.lost}" + "".join(f"; {d}" for d in a.lost_detail[:10])),
        Check("chaos: no duplicated effect", a.duplicated == 0,
              f"duplicated {a.duplicated}" + "".join(f"; {d}" for d in a.duplicated_detail[:10])),
        Check("chaos: no re-executed activity at risk", not a.at_risk,
              f"re-executed {len(a.re_executed)} · guarded {len(a.guarded_re_executed)} · at risk {len(a.at_risk)}"
              + (f": {risky}" if risky else "")),
    ]  # fmt: skip


def _where(fired: dict) -> str:
    at = f" (at {fired['fired_s']:.2f} s)" if "fired_s" in fired else ""
    return f"activity {fired['step']:>4}{at}"


def print_foreign_report(report: dict) -> None:
    for k in report["kills"]:
        r = "none" if k.get("restart_s") is None else f"{k['restart_s']:.2f} s"
        print(f"  kill {k['kind']:<26} {_where(k)} pid {k['pid'] or '-':>7} -> run resumed after {r}")
    for p in report["pauses"]:
        r = "none" if p.get("stalled_s") is None else f"{p['stalled_s']:.2f} s"
        print(f"  {p['kind']:<31} {_where(p)} pid {p['pid'] or '-':>7} -> run stalled {r}")
    for s in report["not_fired"]:
        where = f"activity {s['at_step']}" if "at_step" in s else f"{s['at_s']:.2f} s"
        print(f"  not fired: {s['nemesis']} at {where} ({s['why']})")
    a = ForeignAudit(**{k: v for k, v in report["foreign_audit"].items() if k != "ok"})
    for line in audit_lines(a):
        print(line)
    ok = all(c["ok"] for c in report["checks"])
    print(f"wall {report['wall_s']:.1f} s · verdict: {'PASS' if ok else 'FAIL'}")


async def foreign_chaos_command(
    settings: Settings, workflow: str, arg: Any, seed: int, span: int, kills: int, pauses: int,
    json_path: Path | None, junit_path: Path | None, schedule_file: Path | None, partitions: int = 0,
) -> int:  # fmt: skip
    settings.ensure_dirs()
    devserver.ensure_devserver(settings)
    if schedule_file is not None:
        events, span, file_seed = load_schedule(schedule_file, span)
        events, seed = [map_event(e) for e in events], file_seed if file_seed is not None else seed
    else:
        events = foreign_schedule(seed, span, kills, pauses, partitions)
    report = await ForeignChaos(settings, seed, span, events, workflow, arg).run()
    print_foreign_report(report)
    path = json_path or settings.run_dir / f"chaos-seed{seed}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"wrote {path}")
    checks = [Check(**c) for c in report["checks"]]
    if junit_path is not None:
        write_junit(junit_path, "checkpoint-tui chaos --workflow", checks, time_s=report["wall_s"])
        print(f"wrote {junit_path}")
    return 0 if all(c.ok for c in checks) else 1
