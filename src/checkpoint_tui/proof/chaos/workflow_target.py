"""Chaos against a user's workflow (a `ChaosTarget`, proof/chaos/targets.py), agent frameworks included: the
run's activities are read from Temporal history as it goes (proof/nemeses/aim.py), and every
event is placed on an *activity start*: "at 3" is the third start of an activity the aim picks
(`--aim tool|model|any|GLOB`).

A kill inside an activity is placed over that activity type's observed duration (the median of the
run's earlier completed ones of the type, measured from Temporal's start and close times): at a
seeded fraction of it after Temporal says the attempt started, so some kills land before the
activity's side effect and some after it, instead of wherever polling happens to notice it. A type
not seen completed yet falls back to the event's delay after it was seen running.

A user's worker has no fault hooks and the lab knows none of its timers, so two seeded moments are
mapped: a claim-window crash becomes a kill inside the activity, a kill in a timer a kill between
activities. The supervisor is a separate `supervise --worker-cmd ...` process (it is killed too). A
workflow reset goes back over aimed activities (proof/nemeses/resets.py); an activity pause or reset hits the
aimed activity (proof/nemeses/activity_faults.py)."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from dataclasses import replace

from temporalio.client import Client

from checkpoint_tui.core.activity_audit import ActivityAudit
from checkpoint_tui.core.activity_history import ActivityExec, read_activities
from checkpoint_tui.core.audit import Audit
from checkpoint_tui.core.destination_audit import assign, read_after, save
from checkpoint_tui.core.windows import MODEL, TOOL
from checkpoint_tui.core.workload import Workload
from checkpoint_tui.effects import read_probe_records
from checkpoint_tui.errors import Failed
from checkpoint_tui.frameworks import Classifier, detect
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.destination import read_ids
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.proof.chaos import coverage_activities, landing
from checkpoint_tui.proof.chaos.coverage import Aims
from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.chaos.targets import ChaosRun, ChaosTarget, Handled
from checkpoint_tui.proof.chaos.workflow_checks import (
    IN_ACTIVITY,
    activity_checks,
    aim_check,
    exercised_check,
    re_ran,
    reset_check,
)
from checkpoint_tui.proof.nemeses import activity_faults as activity_nemeses
from checkpoint_tui.proof.nemeses import processes as nemeses
from checkpoint_tui.proof.nemeses import resets
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_NEMESES
from checkpoint_tui.proof.nemeses.aim import PROGRESS_TIMEOUT_S, Progress, aimed, closed_at, until_activity
from checkpoint_tui.proof.nemeses.hop import HOP_KINDS, Arming, Hop, upstream_tls
from checkpoint_tui.proof.nemeses.http_log import HttpLog, log_path
from checkpoint_tui.proof.nemeses.records import NO_WORKER, Fired, Hit, Miss
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.chaos import ActivityFigures, ChaosReport

PHASE = (0.1, 0.95)  # an in-activity kill lands at this fraction of the type's usual duration (seeded)
NO_ACTIVITY_BACK = "the execution had no activity to go back to"
ELSEWHERE_RUNS = 8  # runs asked for an activity in flight when the lead's aimed one had closed (--runs)


def _live_name(settings) -> str | None:
    live = worker_proc.load(settings, "active")
    return live.name if live is not None else None


class ActivityTarget(ChaosTarget):
    def __init__(
        self,
        workload: Workload,
        workflow: str | None,
        framework: Classifier,
        strict_models: bool,
        aim: str = "any",
        seed: int | None = None,
        placed: bool = True,
    ) -> None:
        """`workload`: a user's workflow, of type `workflow` (`framework`: the agent framework that
        classifies its activities, None: recognised; `strict_models`: a model request re-run fails the
        verdict). `placed`: in-activity kills at a seeded fraction of the type's duration (a seeded
        schedule); False: at exactly the event's delay after Temporal's start of the attempt (a file)."""
        self.workload, self.workflow, self.framework, self.strict_models = workload, workflow, framework, strict_models
        self.aim, self.placed = aim, placed
        self.phases = random.Random(f"phase-{seed}")  # a stream of its own: the schedule stays put
        self.progress: Progress | None = None  # the lead run's (it places the events)
        self.runs: dict[str, Progress] = {}  # every run's (--runs)
        self._landing: dict = {}
        self._aimed_id: str | None = None  # the activity id the last arrival landed on
        self._arming: Arming | None = None  # the hop's, for the event being fired
        self._armings: dict[int, Arming] = {}  # each crash point's (by its event), armed as the hop starts
        self.resets: list[Fired] = []  # the lead run's resets, once figures() has read what they re-ran
        self.more: list[Check] = []  # the lead run's checks of its activity pauses and resets
        self.allow_unexercised = False  # --allow-unexercised: a run no fault reached passes
        self.fresh_tools = False  # --every-window: each crash point on the next tool not hit yet

    def header(self, chaos: ChaosRun) -> str:
        return f"{self.workload.title()} aim={self.aim} ({chaos.steps} aimed activity starts)"

    async def activity_windows(self, chaos: ChaosRun, run_id: str) -> dict[str, str]:
        """Each activity type the framework's adapter classed as a model request or a tool call."""
        acts = await read_activities(chaos.client, run_id, None, self.framework)
        names = {"model": MODEL, "tool": TOOL, "mcp": TOOL}
        return {a.activity_type: names[a.cls] for a in acts if a.cls in names}

    def span(self, chaos: ChaosRun) -> int:
        return max(chaos.steps * 4, 40)  # the run's activities are unknown up front: a generous bound

    async def start(self, chaos: ChaosRun, client: Client) -> str:
        run_id = await self.workload.start(chaos.settings, client)
        self.runs[run_id] = Progress(client, run_id, self.framework)
        self.progress = self.progress or self.runs[run_id]
        return run_id

    async def closed(self, chaos: ChaosRun, run_id: str) -> bool:
        progress = self.runs.get(run_id, self.progress)
        assert progress is not None
        await progress.refresh()
        return progress.closed

    def landing(self, ev: ChaosEvent) -> dict:
        """The activity the event's arrival waited for (a time-placed event: none, the latest one)."""
        if ev.at_s is not None:
            return {}
        landing = {k: v for k, v in self._landing.items() if k != "started_at"}
        return {**landing, "aimed": ev.step}

    def hop(self, chaos: ChaosRun, upstream: str) -> Hop | None:
        """The hop between the workers and Temporal, when an event needs a crash point of its (hop.py)."""
        if not any(ev.kind in HOP_KINDS for ev in chaos.schedule):
            return super().hop(chaos, upstream)
        settings = chaos.settings
        tls = upstream_tls(settings) if settings.connection.tls else None
        hop = Hop(upstream, self.aim, self.framework, lambda who: nemeses.kill_worker_of(settings, who), tls)
        # Every crash point is armed before the run starts: each lands as its task passes, not after the events
        # before it were done (a dev server's restart takes seconds; a run of fast tools may be over by then).
        # The k-th aimed task of any workflow on the lab's workers: the run's (and its children's; the lead's and
        # the others' with --runs).
        self._armings = {
            id(ev): hop.arm(None, ev.step or 1, ev.kind, self.fresh_tools)
            for ev in chaos.schedule
            if ev.kind in HOP_KINDS
        }
        return hop

    async def _armed(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> str | None:
        """Wait until the hop fired the event's crash point (None), or the run closed first (why not)."""
        assert self.progress is not None and chaos.hop is not None
        arming = self._armings[id(ev)]
        deadline = time.monotonic() + PROGRESS_TIMEOUT_S
        while not arming.fired.is_set():
            if self.progress.closed:  # seen closed (here, or by an earlier event's wait)
                chaos.hop.disarm(arming)
                return (
                    f"the workflow closed after {len(self.progress.acts)} activities, {self._count(self.progress)} "
                    f"of them aimed ({self.aim})"
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(arming.fired.wait(), 0.25)
            if arming.fired.is_set():
                break
            await self.progress.refresh()
            if time.monotonic() > deadline:
                raise Failed("the run stopped making progress (see run/worker.log, run/temporal.log)")
        self._arming = arming
        task = arming.task
        if task is not None:
            step = int(task.activity_id) if task.activity_id.isascii() and task.activity_id.isdigit() else task.aimed_at
            self._landing = {"step": step, "label": task.label, "class": task.cls}
        return None

    async def arrive(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> str | None:
        progress, k = self.progress, ev.step or 0
        assert progress is not None
        if ev.kind in HOP_KINDS:
            return await self._armed(chaos, ev, run_id)
        between = ev.kind in ("worker-between-activities", resets.RESET)  # a reset: once the activity closed
        live = None if between else (lambda: _live_name(chaos.settings))
        act = await until_activity(progress, lambda: progress.aimed(self.aim, k), live)
        # at load the lead can be done before its event comes: another run's activity in flight instead
        late = act is None or ev.kind in IN_ACTIVITY and act.closed_at is not None
        other = await self._elsewhere(chaos) if late and len(chaos.run_ids) > 1 else None
        if other is not None:
            progress, act = other
        if act is None:
            return (
                f"the workflow closed after {len(progress.acts)} activities, {self._count(progress)} of them "
                f"aimed ({self.aim})"
            )
        self._landing, self._aimed_id = {"step": act.seq, "label": act.label, "class": act.cls}, act.activity_id
        if other is not None:  # said: the kill is aimed in that run, the lead's own activity had closed
            self._landing["run"] = progress.run_id
        if ev.kind == "worker-in-activity":  # the audit's cause of that activity's timeout, however late its retry
            self._landing |= {"activity_id": act.activity_id, "aimed_workflow": progress.run_id}
        if act.task_queue and act.task_queue != chaos.settings.task_queue:
            self._landing["queue"] = act.task_queue  # a fleet: the kill goes to that queue's worker
        inside = ev.kind in IN_ACTIVITY and act.started_at is not None and act.closed_at is None
        usual = progress.usual_s(act) if inside and self.placed else None
        if inside and usual is not None:
            phase = round(self.phases.uniform(*PHASE), 3)
            await asyncio.sleep(max(0.0, act.started_at + phase * usual - time.time()))  # type: ignore[operator]
            self._landing.update(phase=phase, usual_s=round(usual, 3), started_at=act.started_at)
        elif inside:  # from Temporal's start of the attempt, not from when polling saw it
            await asyncio.sleep(max(0.0, act.started_at + ev.delay_ms / 1000 - time.time()))  # type: ignore[operator]
            self._landing["started_at"] = act.started_at
        else:
            await asyncio.sleep(ev.delay_ms / 1000)
        return None

    async def _elsewhere(self, chaos: ChaosRun) -> tuple[Progress, ActivityExec] | None:
        """An aimed activity in flight now in a run after the lead, on the lab's live worker: the newest
        runs first (the likeliest still going), ELSEWHERE_RUNS of them asked at most (each a history read)."""
        live = _live_name(chaos.settings)
        for run_id in [r for r in reversed(chaos.run_ids[1:]) if r in self.runs][:ELSEWHERE_RUNS]:
            progress = self.runs[run_id]
            await progress.refresh()
            for act in progress.acts:
                going = act.status == "running" and act.started_at is not None and act.closed_at is None
                if going and aimed(self.aim, act) and live in (None, act.identity or live):
                    return progress, act
        return None

    def _count(self, progress: Progress) -> int:
        return sum(aimed(self.aim, a) for a in progress.acts)

    async def strike(self, chaos: ChaosRun, ev: ChaosEvent, run_id: str) -> Hit | Miss | Handled:
        if ev.kind in ACTIVITY_NEMESES:  # the aimed activity if still pending
            return await activity_nemeses.fire(chaos.client, ev.kind, ev.duration_s, run_id, prefer=self._aimed_id)
        if ev.kind == resets.RESET:
            done = await self._reset(ev, run_id)
            return Hit(done.pop("at"), detail=done) if done is not None else Miss(NO_ACTIVITY_BACK)
        if ev.kind in HOP_KINDS:  # fired by the hop as the task or its completion passed
            arming = self._arming
            assert arming is not None
            return arming.hit if arming.hit is not None else Miss(arming.why or NO_WORKER)
        if ev.kind not in ("worker-in-activity", "worker-between-activities"):
            return Handled.NOT_MINE
        queue = self._landing.get("queue") if ev.kind == "worker-in-activity" else None  # its activity's worker
        hit = nemeses.kill_active_worker(chaos.settings, queue)
        if hit is None:  # between a death and its replacement: said, not dropped
            return Miss(NO_WORKER)
        if (started := self._landing.get("started_at")) is not None:
            return replace(hit, detail={"into_s": round(hit.at - started, 3)})
        return hit

    def probe(self, chaos: ChaosRun) -> list | None:
        return read_probe_records(chaos.settings.probe_log)

    def coverage_aims(self, chaos: ChaosRun) -> Aims:
        """The windows the seeded run showed and timing can reach (proof/chaos/coverage_activities.py)."""
        assert self.progress is not None
        claims = queries.claim_attempts(connect(chaos.settings.ledger), self.progress.run_id)
        return coverage_activities.aims(
            coverage_activities.spots(self.progress.acts, claims, self.probe(chaos) or [], self.progress.chain)
        )

    def round_target(self) -> ActivityTarget:
        """Aimed rounds place each kill exactly (a delay after Temporal's start or close of an activity)."""
        again = ActivityTarget(self.workload, self.workflow, self.framework, self.strict_models, "any", placed=False)
        return again

    async def audit(self, chaos: ChaosRun, run_id: str, status: str | None) -> Audit:
        """The workload's audit; the run's progress is read once more first: what the run made after the
        last event (a reset's new execution, the last activities) is where stalls and resets look."""
        await self.runs[run_id].refresh()
        return await super().audit(chaos, run_id, status)

    def ended_at(self, chaos: ChaosRun) -> float | None:
        ends = [closed_at(p.chain) for p in self.runs.values()]
        return None if not ends or None in ends else max(e for e in ends if e is not None)

    def read_destinations(self, chaos: ChaosRun) -> list:
        return [read_ids(d, chaos.settings.run_dir) for d in self.workload.destinations]

    def http_logs(self, chaos: ChaosRun) -> dict[str, HttpLog]:
        return {
            d.target: HttpLog(log_path(chaos.settings.run_dir, d.target), d.pattern or "")
            for d in self.workload.destinations
            if d.kind == "http"
        }

    async def at_destination(self, chaos: ChaosRun, before: list) -> None:
        if not self.workload.destinations:
            return
        runs = {r: await read_activities(chaos.client, r, None, self.framework) for r in self.runs}  # children too
        diffs = [
            await asyncio.to_thread(read_after, d, b, chaos.settings.run_dir)
            for d, b in zip(self.workload.destinations, before, strict=True)
        ]
        dups = assign(diffs, runs, chaos.run_ids[0])
        for run_id in self.runs:  # each run's audit reads it back (core/activity_audit.audit_of): one verdict
            save(chaos.settings.run_dir, run_id, diffs, dups.get(run_id, []))

    def in_flight(self, chaos: ChaosRun, run_id: str) -> int:
        return max(len(self.progress.acts), 1) if self.progress is not None else 1

    async def _reset(self, ev: ChaosEvent, run_id: str) -> dict | None:
        """Back to the workflow task that scheduled the aimed activity `back_steps - 1` before the one the
        event fired after, in the current execution (else that execution's first activity)."""
        progress, back = self.progress, ev.back_steps or 2
        assert progress is not None
        await progress.refresh()
        here = len(progress.chain.executions) - 1
        picked = [a for a in progress.acts if aimed(self.aim, a)]
        current = [a for a in picked if a.segment == here] or [a for a in progress.acts if a.segment == here]
        if not picked or not current:
            return None
        target = picked[max(0, min(ev.step or 1, len(picked)) - back)]
        target = target if target.segment == here else current[0]
        execution, events = progress.chain.executions[here]
        point = resets.scheduled_by(events, target.activity_id)
        if point is None:
            return None
        done = await resets.reset_to(progress.client, run_id, execution, point, f"reset to activity {target.seq}")
        return {**done, "from_step": target.seq, "back_steps": back, "from_label": target.label}

    def stalls(self, chaos: ChaosRun, run_id: str) -> None:
        landing.place(chaos, self.progress, run_id, [p.chain for p in self.runs.values()], self.runs)

    def figures(self, chaos: ChaosRun, run_id: str) -> ActivityFigures:
        claims = queries.claim_attempts(connect(chaos.settings.ledger), run_id)
        progress = self.progress
        for r in chaos.resets if progress is not None else []:  # what each reset ran again
            assert progress is not None
            r.detail.update(resets.activities_reran(progress.chain, claims, {"at": r.at, **r.detail}, self.framework))
            r.detail["at_risk"] = sum(e["verdict"] == "at risk" for e in r.detail["re_ran"])
        self.resets = chaos.resets
        acted = [p for p in chaos.pauses if p.kind in ACTIVITY_NEMESES]
        self.more = (
            [
                activity_nemeses.activity_check(
                    acted, lambda f: [c for c in claims if str(c.step) == f.detail["activity_id"]]
                )
            ]
            if acted
            else []
        )
        acts = self.progress.acts if self.progress is not None else []
        if acts and not any(aimed(self.aim, a) for a in acts):  # a mistyped --aim fired nothing: not a pass
            self.more.append(aim_check(self.aim, acts))
        self.more.append(
            exercised_check(chaos, [a for p in self.runs.values() for a in p.acts], self.aim, self.allow_unexercised)
        )
        used = next((a.classed_by for a in acts if a.classed_by), None)  # the counts' framework, as the audit's
        return ActivityFigures(workflow=self.workflow, aim=self.aim, framework=used or detect(a.seen() for a in acts))

    def checks(self, audit: Audit) -> list[Check]:
        assert isinstance(audit, ActivityAudit)  # this workload's (UserWorkflow.audit)
        lead = self.progress is not None and audit.run_id == self.progress.run_id
        more = [reset_check(self.resets, self.strict_models)] if self.resets else []
        return activity_checks(audit) + ((more + self.more) if lead else [])

    def reset_summary(self, r: Fired) -> str:
        """What a fired reset ran again (its detail: resets.activities_reran) and the claims after it."""
        reran = re_ran(r)
        n = Counter(e["verdict"] for e in reran)
        after = ", ".join(f"{k} {v}" for k, v in sorted((r.detail.get("claims_after_reset") or {}).items()))
        return (
            f"re-ran {len(reran)} activities (guarded {n['guarded']}, AT RISK {n['at risk']}, "
            f"model {n['model']}) · claims after it: {after or 'none'}"
        )

    def lines(self, report: ChaosReport) -> list[str]:
        found = [
            f"  {'AT RISK' if e['verdict'] == 'at risk' else e['verdict']} after the reset at {r.step}: "
            f"#{e['activity_id']} {e['label']} ({e['was']}) · {e['claims_after_reset'] or 'no claim'} · {e['why']}"
            for r in report.resets
            for e in re_ran(r)
        ]
        lines = found + (self.lead_audit.lines() if self.lead_audit is not None else [])
        if report.resets:  # the audit above counts attempts; what a reset re-ran is a new execution's
            n = Counter(e["verdict"] for r in report.resets for e in re_ran(r))
            lines.append(
                f"RESETS {len(report.resets)} · re-ran {sum(n.values())} · guarded {n['guarded']} · "
                f"AT RISK {n['at risk']} · model requests {n['model']}"
            )
        return lines
