"""Chaos against checkpoint-tui's own AgentLoop (a `ChaosTarget`, proof/chaos/targets.py): an event's moment
is read from the ledger's step and activity rows, a claim-window crash is the worker's own planned
fault, a forged email is written into the outbox, and the run is audited from the ledger, the
artifact files and Temporal's status (core/step_audit.py, the workload's audit)."""

from __future__ import annotations

import asyncio
import contextlib

from temporalio.client import Client

from checkpoint_tui.core.audit import Audit
from checkpoint_tui.core.runs import TERMINAL
from checkpoint_tui.core.workload import Workload
from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.latency import measure
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.shared import timer_ms
from checkpoint_tui.proof.chaos.coverage import Aims, ours
from checkpoint_tui.proof.chaos.schedule import FORGE, HOOK_CRASHES, PARTITION, PAUSES, ChaosEvent
from checkpoint_tui.proof.chaos.targets import ChaosRun, ChaosTarget, Handled, until
from checkpoint_tui.proof.nemeses import activity_faults as activity_nemeses
from checkpoint_tui.proof.nemeses import processes as nemeses
from checkpoint_tui.proof.nemeses import resets
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_NEMESES
from checkpoint_tui.proof.nemeses.records import Fired, Hit, Miss
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.audit import AuditRecord, StepAuditRecord, audit_record, read_audit
from checkpoint_tui.proof.report.chaos import ChaosReport, StepFigures
from checkpoint_tui.proof.report.codec import JsonObject, ReportError

# Process events placed at a step's model call (its `llm` activity logged, then the event's delay)
AT_A_MODEL_CALL = ("supervisor", "temporal-server", PARTITION, *PAUSES)


class StepTarget(ChaosTarget):
    def __init__(self, workload: Workload, pace: float) -> None:
        """`workload`: our loop, shaped for each run chaos starts; `pace`: the pace of those runs."""
        self.workload, self.pace = workload, pace
        self.resets: list[Fired] = []  # the run's resets, once figures() has read what they re-ran
        self.more: list[Check] = []  # the checks of its activity pauses and resets
        self._struck: dict[int, int] = {}  # id of an event striking -> the step running as it struck

    def header(self, chaos: ChaosRun) -> str:
        return f"steps={chaos.steps}"

    async def start(self, chaos: ChaosRun, client: Client) -> str:
        lead = not chaos.run_ids  # the schedule's own faults are the lead run's (it places the events)
        plan = [
            FaultSpec(HOOK_CRASHES[e.kind], e.step, effect_kind=e.effect_kind)
            for e in chaos.schedule
            if lead and e.kind in HOOK_CRASHES and e.step is not None  # a hook crash is placed by step
        ]
        return await self.workload.shaped(chaos.steps, self.pace, plan).start(chaos.settings, client)

    def round_target(self) -> StepTarget:
        return StepTarget(self.workload, self.pace)

    def span(self, chaos: ChaosRun) -> int:
        return chaos.steps

    def coverage_aims(self, chaos: ChaosRun) -> Aims:
        """Every window of core/windows.py, the claim-window hooks included (the worker's own fault plan)."""
        return ours()

    def reset_summary(self, r: Fired) -> str:
        """What a fired reset ran again and what the ledger answered (its detail: resets.what_it_reran),
        on one line."""
        after = r.detail.get("claims_after_reset") or {}
        reran = sum(a.get("count", 1) for a in r.detail.get("re_ran") or [])
        skipped, applied = after.get("skipped", 0), after.get("applied", 0)
        return f"re-ran {reran} activities · claims skipped {skipped} · applied again {applied}"

    async def closed(self, chaos: ChaosRun, run_id: str) -> bool:
        try:
            row = queries.run(connect(chaos.settings.ledger), run_id)
        except Unavailable:  # the ledger restarting: not closed; ask again
            return False
        return row is None or row.status in TERMINAL

    async def arrive(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> str | None:
        conn = connect(chaos.settings.ledger)
        step = ev.step or 0
        if ev.kind in HOOK_CRASHES:
            await until(lambda: queries.count_completed(conn, run_id) >= step)  # the worker kills itself
            return None
        if ev.kind in ("worker-in-activity", *AT_A_MODEL_CALL, *ACTIVITY_NEMESES):
            await until(lambda: queries.activity_logged(conn, run_id, step, "llm"))
        elif ev.kind == "worker-between-activities":
            await until(lambda: queries.activity_logged(conn, run_id, step, "effect"))
        else:  # in the timer after the step; a forged email: once the step's email is stamped
            await until(lambda: queries.count_completed(conn, run_id) >= step)
            if ev.kind == "worker-in-timer":
                await asyncio.sleep(timer_ms(step, self.pace) / 1000 * ev.delay_ms / 120)
        await asyncio.sleep(ev.delay_ms / 1000 if ev.kind != "worker-in-timer" else 0)
        return None

    async def strike(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> Hit | Miss | Handled:
        if ev.kind in HOOK_CRASHES:  # the worker's fault plan
            return Handled.BY_THE_WORKER
        if ev.kind == FORGE:
            return nemeses.forge_duplicate_email(chaos.settings, connect(chaos.settings.ledger), run_id, ev.step or 0)
        if ev.kind in ACTIVITY_NEMESES:  # whatever activity of the step is in flight (its model call, mostly)
            return await activity_nemeses.fire(chaos.client, ev.kind, ev.duration_s, run_id)
        if ev.kind == resets.RESET:
            done = await resets.reset_workflow(chaos.client, run_id, ev.step or 1, ev.back_steps or 2)
            if done is None:
                return Miss("the execution had no step to go back to")
            return Hit(done.pop("at"), detail={**done, "step": ev.step})
        return Handled.NOT_MINE

    def striking(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> None:
        """A process event placed at a step's model call strikes where the run is by then: its delay, an
        earlier event (a hang waits for the watchdog) or a loaded machine can bring it there after the
        step ended, and its marker and kill line would say the schedule's step. The ledger's latest
        activity says where: the step a worker is in, or the one whose timer runs once it completed (a
        worker-in-timer kill's place); after the last step, nowhere to say. Noted before the strike: a
        pause's or a hang's record comes after it ended, too late to ask."""
        if ev.step is None or ev.at_s is not None or ev.kind not in AT_A_MODEL_CALL:
            return
        with contextlib.suppress(Unavailable):  # the ledger restarting: the schedule's step is said
            conn = connect(chaos.settings.ledger)
            now = queries.last_logged_step(conn, run_id)
            if now is not None and now > ev.step and queries.count_completed(conn, run_id) < chaos.steps:
                self._struck[id(ev)] = now

    def landing(self, ev: ChaosEvent) -> dict:
        now = self._struck.pop(id(ev), None)
        return {"step": now, "aimed": ev.step} if now is not None else {}

    def in_flight(self, chaos: ChaosRun, run_id: str) -> int:
        """The step a time-placed event landed in: the first one not completed yet."""
        return min(queries.count_completed(connect(chaos.settings.ledger), run_id) + 1, chaos.steps)

    def stalls(self, chaos: ChaosRun, run_id: str) -> None:
        conn = connect(chaos.settings.ledger)
        for k in chaos.kills:
            if k.kind.startswith("worker") and k.pid is not None:  # a kill of a worker names its pid
                k.restart_s = measure(conn, run_id, k.at, k.pid, None).restart_s
            else:  # the run's next activity after the supervisor / dev server came back
                first = queries.first_activity_after(conn, run_id, k.at)
                k.restart_s = None if first is None else first - k.at
            k.stalled_s = k.recovery_s = k.restart_s  # a kill ends when it lands

    def figures(self, chaos: ChaosRun, run_id: str) -> StepFigures:
        conn = connect(chaos.settings.ledger)
        for r in chaos.resets:  # what each reset ran again, and what the ledger answered
            r.detail.update(resets.what_it_reran(conn, run_id, {"at": r.at, "step": r.step, **r.detail}))
        self.resets = chaos.resets
        acted = [p for p in chaos.pauses if p.kind in ACTIVITY_NEMESES]
        for f in acted:  # the attempts of the activity started after it (activity_log)
            step = f.step or 0  # always set: the step it landed in (Chaos._record)
            again = queries.activities_since(conn, run_id, f.at, step, step)
            activity_nemeses.settle(
                f,
                f.detail["attempt_before"]
                + sum(a["count"] for a in again if a["activity"] == f.detail["activity_type"]),
            )
        claims = queries.claim_attempts(conn, run_id) if acted else []
        self.more = (
            [activity_nemeses.activity_check(acted, lambda f: [c for c in claims if c.step == f.step])] if acted else []
        )
        for f in [*chaos.kills, *chaos.pauses]:  # how long each held the run (a kill's: its restart)
            if f.stalled_s is None:
                f.stalled_s, f.recovery_s = nemeses.stall_times(conn, run_id, f.at, f.detail)
        fired = [(f.kind, f.stalled_s, f.recovery_s) for f in [*chaos.kills, *chaos.pauses]]
        return StepFigures(
            nemeses=nemeses.nemesis_figures(fired),
            worker_deaths_seen_by_supervisor=len(queries.death_events(conn, run_id, kinds=("died",))),
        )

    def checks(self, audit: Audit) -> list[Check]:
        found = audit_checks(audit_record(audit))
        if self.resets:  # what figures() found for them
            again = sum(r.detail["claims_after_reset"].get("applied", 0) for r in self.resets)
            idle = [r.step for r in self.resets if not r.detail["re_ran"]]
            found.append(
                Check(
                    "chaos: a reset applies no effect again",
                    again == 0 and not idle,
                    f"{len(self.resets)} reset(s) · effects applied again {again} · resets that re-ran nothing {idle}",
                )
            )
        return found + self.more

    def lines(self, report: ChaosReport) -> list[str]:
        lines = self.lead_audit.lines() if self.lead_audit is not None else []
        kinds = report.figures.nemeses if isinstance(report.figures, StepFigures) else {}
        for kind, f in kinds.items():
            med, top, back = (
                ("—" if v is None else f"{v:.2f} s") for v in (f.median_stall_s, f.max_stall_s, f.median_recovery_s)
            )
            lines.append(f"  {kind:<26} x{f.count:<3} median stall {med} · max {top} · median after its end {back}")
        return lines


def audit_checks(audit: AuditRecord | JsonObject) -> list[Check]:
    """The audit's verdict as checks (for --junit): it is ok exactly when all of them pass. `audit`: our
    loop's audit as the report has it (or its JSON)."""
    a = read_audit(audit) if isinstance(audit, dict) else audit
    if not isinstance(a, StepAuditRecord):
        raise ReportError("audit: our loop's chaos checks read a step audit (one with total_steps)")
    done = a.total_steps - len(a.step_gaps)
    claims = (
        f"claims attempted {a.claims_attempted} · applied {a.applied} · skipped {a.skipped} · "
        f"recovered {a.recovered} · interrupted {a.interrupted}"
    )
    lost = "".join(f"; {d}" for d in a.lost_detail[:10])
    duplicated = "".join(f"; {d}" for d in a.duplicated_detail[:10])
    return [
        Check(
            "chaos: workflow COMPLETED",
            a.workflow_status == "COMPLETED",
            f"workflow {a.workflow_status} · steps {done}/{a.total_steps}",
        ),
        Check("chaos: no lost effect", a.lost == 0, f"lost {a.lost} · {claims}{lost}"),
        Check("chaos: no duplicated effect", a.duplicated == 0, f"duplicated {a.duplicated} · {claims}{duplicated}"),
        Check("chaos: no step gaps", not a.step_gaps, f"step gaps {a.step_gaps}"),
    ]
