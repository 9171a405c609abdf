"""The audit of a user's workflow run, with or without the effects library, by activity class.

What it can see, and from where:
- **re-executed** (from Temporal history): every activity whose closing attempt is > 1, i.e. that
  ran more than once (a retry, or a worker killed under it and the activity started again). Each is
  of a class (frameworks/): a tool call (named, with its call id), an MCP call, a model request,
  or another activity.
- **guarded**: the activity made at least one claim attempt through the library (an
  `effect_outcomes` row of the run with `step` = its activity id). A re-executed tool call or other
  activity without one is **at risk**: whatever it did to the outside world may have happened once
  per attempt, and the lab cannot see it.
- **model requests re-run** are reported apart, with the tokens their completed attempts used (paid
  again for each extra attempt, as far as history tells): a model request has no side effect of its
  own, so it fails the verdict only under `--strict-models`.
- **never ran**: an activity whose arguments the worker could not decode (its failures say so) ran
  no body, however many attempts it had; and one that has not completed, failed every attempt and
  claimed nothing through the library (an exception raised before its effects, e.g. a framework's
  node that finds no message to act on): it is not at risk, it is broken, and its work is lost. (What
  it did outside the library before it failed, the lab cannot see.)
- **a workflow task that keeps failing** (core/stuck.py): the run cannot make progress.
- **lost work** (core/lost_work.py, from history and the lab's worker events): attempts that waited out a
  timeout, each with the lab event that caused it (a SIGKILL's costs a wait; none, or a graceful stop,
  is the application's loss), final timeouts, a failed or timed-out workflow, workflow task failures
  (how long the run was stuck, or that it still is), and schedule-to-start latency.
- **with the library** (the ledger): effects claimed but never stamped (lost, once the workflow is
  over), duplicate effect ids, and the claim outcomes (applied / skipped / recovered / interrupted).
- **the probe log** (independent of the ledger's rows): physical `write` calls per effect key. A key
  written more often than its claim attempts allow (one write per attempt that claimed or recovered
  it, or died before recording its outcome) is duplicated; a stamped key never written is lost. A
  write entered again by a recovery is listed: the protocol allows it, so the write must be
  idempotent (the example's checks for its line under a lock).

It cannot see side effects the activity makes outside the library, nor writes to a probe log other
than the lab's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from checkpoint_tui.core import audit_names, destination_audit
from checkpoint_tui.core.activity_history import ActivityExec
from checkpoint_tui.core.audit import lost_verdict
from checkpoint_tui.core.audit_names import names
from checkpoint_tui.core.chain import Chain
from checkpoint_tui.core.lost_work import LostWork, read_lost_work
from checkpoint_tui.core.lost_work_lines import lost_work_lines
from checkpoint_tui.core.stuck import STUCK
from checkpoint_tui.effects import read_probe_log
from checkpoint_tui.frameworks import detect
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import EffectRow
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.settings import Settings

DETAIL_LIMIT = 200  # lines of detail kept per list (a long run's report stays readable)
# How a dead worker's attempt fails: Temporal's timeouts, ops/failover.py's assisted failure, and chaos's
# hop's (proof/nemeses/handed.py).
SEEN_BY_HOP = "died (seen by the lab's hop)"
WORKER_DEATHS = ("timeout", "died (seen by the supervisor)", SEEN_BY_HOP)


@dataclass
class ActivityAudit:
    run_id: str
    workflow_type: str | None
    workflow_status: str | None
    activities: int = 0
    completed: int = 0
    framework: str | None = None
    strict_models: bool = False
    re_executed: list[dict] = field(default_factory=list)  # each: the activity, guarded or not, its effects
    at_risk: list[dict] = field(default_factory=list)  # re-executed tool/other with no guarded effect
    guarded_re_executed: list[dict] = field(default_factory=list)
    model_reruns: list[dict] = field(default_factory=list)  # re-executed model requests
    tokens_paid_again: int = 0  # the completed attempt's usage x the extra attempts, over model_reruns
    never_ran: list[dict] = field(default_factory=list)  # arguments never decoded: no body ran
    tool_calls: int = 0
    model_requests: int = 0
    effects: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    unstamped: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    re_entered: list[str] = field(default_factory=list)  # writes entered again by a recovery (by the protocol)
    duplicate_ids: int = 0
    probe_available: bool = False
    probe_writes: dict[str, int] = field(default_factory=dict)  # this run's effect keys -> physical writes
    lost: int = 0
    duplicated: int = 0
    lost_detail: list[str] = field(default_factory=list)
    duplicated_detail: list[str] = field(default_factory=list)
    lost_work: dict = field(default_factory=dict)  # LostWork.to_dict() (core/lost_work.py); {}: history not read
    lost_work_count: int = 0  # units of work lost by the application (not what the lab's kills cost in waiting)
    # Where the effects land (--effects; core/destination_audit.py): each destination's reading, the re-executed
    # calls whose effect stood once there, and the ids the run put there more than once.
    destinations: list[dict] = field(default_factory=list)
    effect_once: list[dict] = field(default_factory=list)
    destination_duplicates: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        models_ok = not (self.strict_models and self.model_reruns)
        clean = not self.lost and not self.duplicated and not self.at_risk and not self.never_ran
        return self.workflow_status == "COMPLETED" and clean and models_ok and not self.lost_work_count

    def sentence(self) -> str | None:
        """The completion sentence of the run, from this audit (the one verdict the app, `status`
        and chaos show); None while the workflow runs (and can go on)."""
        if self.workflow_status in (None, "RUNNING"):
            return None
        state = {"COMPLETED": "completed", "CANCELED": "cancelled", STUCK: "stuck"}.get(self.workflow_status, "failed")
        verdict = "nothing at risk, lost or duplicated" if self.ok else "NOT exactly once"
        unfinished = self.workflow_status != "COMPLETED"
        if not self.ok and (unfinished or self.lost_work_count) and self._effects_clean(unfinished):
            # lost work, not an exactly-once failure: named by its first unit when history names one
            verdict = lost_verdict(self.workflow_status, self.lost_work.get("first") if self.lost_work_count else None)
            verdict += f" · {self.lost} effect(s) left claimed, never stamped" if self.lost else ""
        elif self.at_risk:
            verdict += (
                f" ({len(self.at_risk)} re-executed at risk: {names(self.at_risk)}; to prove them, name "
                "where their effects land with --effects, or make them through the effects library)"
            )
        elif self.never_ran:
            verdict += f" ({len(self.never_ran)} never ran: {names(self.never_ran)} · {self.never_ran[0]['why']})"
        elif self.lost or self.duplicated:
            verdict += f" (lost {self.lost}, duplicated {self.duplicated})"
        elif not self.ok and self.model_reruns:
            verdict += f" ({len(self.model_reruns)} model requests re-run, --strict-models)"
        once = f", effect once {len(self.effect_once)}" if self.destinations else ""
        return (
            f"run {state} — {self.completed} of {self.activities} activities, re-executed {len(self.re_executed)} "
            f"(guarded {len(self.guarded_re_executed)}{once}, model {len(self.model_reruns)}) · {verdict}"
        )

    def _effects_clean(self, unfinished: bool = False) -> bool:
        """Nothing duplicated, at risk or broken. `unfinished`: the run ended without completing, so an
        effect it claimed and never stamped died with the run (its work is lost, nothing was done twice)."""
        excused = unfinished and all("never stamped" in d for d in self.lost_detail)
        return not (
            (self.lost and not excused)
            or self.duplicated
            or self.at_risk
            or self.never_ran
            or (self.strict_models and self.model_reruns)
        )

    def summary(self) -> str:
        return (
            f"activities={self.completed}/{self.activities} re-executed={len(self.re_executed)} "
            f"guarded={len(self.guarded_re_executed)} at_risk={len(self.at_risk)} "
            f"model_reruns={len(self.model_reruns)} never_ran={len(self.never_ran)} lost={self.lost} "
            f"duplicated={self.duplicated} lost_work={self.lost_work_count}"
        )

    def lines(self) -> list[str]:
        return audit_lines(self)

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok, "verdict": self.sentence()}


def audit_activities(
    conn: Ledger,
    run_id: str,
    workflow_type: str | None,
    workflow_status: str | None,
    acts: list[ActivityExec],
    probe_counts: dict[str, int] | None,
    strict_models: bool = False,
    lost: LostWork | None = None,
) -> ActivityAudit:
    """`acts` from history, classified (core/activity_history.py); `probe_counts` the probe log's
    writes per key, or None when there is no probe log (a worker that does not use the library);
    `lost` what history says was lost (core/lost_work.py), None when it was not read."""
    a = ActivityAudit(run_id, workflow_type, workflow_status, len(acts), sum(x.status == "completed" for x in acts))
    if lost is not None:
        a.lost_work, a.lost_work_count = lost.to_dict(), lost.lost
    a.strict_models = strict_models
    # whose rules gave the counts (a forced or declared one too): the header and the counts agree
    a.framework = next((x.classed_by for x in acts if x.classed_by), None) or detect(x.seen() for x in acts)
    a.tool_calls = sum(x.cls in ("tool", "mcp") for x in acts)
    a.model_requests = sum(x.cls == "model" for x in acts)
    effects = queries.effects(conn, run_id)
    by_id = {e.id: e for e in effects}
    by_step: dict[int, list[EffectRow]] = {}  # an activity's claim attempts (a business key may be shared)
    for claim in queries.claim_attempts(conn, run_id):
        claimed = by_step.setdefault(claim.step, [])
        if claim.effect_id in by_id and by_id[claim.effect_id] not in claimed:
            claimed.append(by_id[claim.effect_id])
    a.effects, a.outcomes = len(effects), queries.outcome_counts(conn, run_id)
    a.duplicate_ids = queries.effect_totals(conn, run_id).duplicates
    a.probe_available = probe_counts is not None
    a.probe_writes = {e.id: (probe_counts or {}).get(e.id, 0) for e in effects} if probe_counts is not None else {}
    for act in acts:
        if not act.re_executed:
            continue
        guarded = by_step.get(int(act.activity_id)) if act.activity_id.isdigit() else None
        entry = {**act.to_dict(), "guarded": bool(guarded), "effects": [_effect_line(e, a) for e in guarded or []]}
        a.re_executed.append(entry)
        if not guarded and (act.decode_error or _failing(act)):
            a.never_ran.append({**entry, "why": "decode error" if act.decode_error else "fails before any claim"})
        elif act.cls == "model":
            a.model_reruns.append(entry)
            a.tokens_paid_again += (act.info.tokens or 0) * (act.attempt - 1) if act.info is not None else 0
        else:
            (a.guarded_re_executed if guarded else a.at_risk).append(entry)
    _ledger_checks(a, effects)
    _probe_checks(a, effects)
    a.lost, a.duplicated = len(a.lost_detail), len(a.duplicated_detail)
    for name in (
        "lost_detail",
        "duplicated_detail",
        "re_executed",
        "at_risk",
        "guarded_re_executed",
        "re_entered",
        "model_reruns",
        "never_ran",
    ):
        setattr(a, name, getattr(a, name)[:DETAIL_LIMIT])
    return a


def _failing(act: ActivityExec) -> bool:
    """Not completed, and its last attempt raised (history keeps that failure's message): not a worker
    that died under it (a timeout, or the supervisor's assisted failure), which its next attempt mends."""
    failure = (act.last_failure or "").lower()
    return act.status != "completed" and bool(failure) and not any(d in failure for d in WORKER_DEATHS)


def _effect_line(e: EffectRow, a: ActivityAudit) -> str:
    writes = f" · {a.probe_writes.get(e.id, 0)} physical write(s)" if a.probe_available else ""
    return f"{e.id} ({e.kind}) {e.outcomes or 'no claim outcome'}{writes}"


def _ledger_checks(a: ActivityAudit, effects: list[EffectRow]) -> None:
    over = a.workflow_status not in (None, "RUNNING")
    for e in effects:
        if e.applied_at is None:
            a.unstamped.append(e.id)
            if over:
                a.lost_detail.append(f"{e.id}: claimed, never stamped (the workflow is over)")
        if "recovered" in e.outcomes.split(","):
            a.recovered.append(e.id)
    if a.duplicate_ids:
        a.duplicated_detail.append(f"{a.duplicate_ids} duplicate effect ids")


def _probe_checks(a: ActivityAudit, effects: list[EffectRow]) -> None:
    """The probe log against the claim attempts: a write may be entered once per attempt that claimed
    the right to write (applied, recovered) or died before its outcome was recorded (interrupted: it
    may have been inside the write). More writes than that were made outside the protocol."""
    if not a.probe_available:
        return
    for e in effects:
        n = a.probe_writes.get(e.id, 0)
        outcomes = Counter(e.outcomes.split(",")) if e.outcomes else Counter()
        allowed = outcomes["applied"] + outcomes["recovered"] + outcomes["interrupted"]
        if n > allowed:
            a.duplicated_detail.append(
                f"{e.id}: {n} physical writes in the probe log, {allowed} claim attempt(s) entitled to write"
            )
        elif n > 1:
            a.re_entered.append(f"{e.id}: write entered {n} times ({e.outcomes}): a redone write must be idempotent")
        if n == 0 and e.applied_at is not None:
            a.lost_detail.append(f"{e.id}: stamped, but no physical write in the probe log")


def audit_of(
    settings: Settings,
    run_id: str,
    workflow_type: str | None,
    status: str | None,
    acts: list[ActivityExec],
    strict_models: bool = False,
    chain: Chain | None = None,
) -> ActivityAudit:
    """The audit of a run of a user's workflow against this home's ledger and probe log (the one place
    `status`, the app and chaos get it from). With the run's `chain` (the history `acts` were read
    from), its lost work too, each timeout against the lab's worker events of the ledger; with the
    reading of where its effects land that chaos saved (core/destination_audit.py), that too."""
    conn = connect(settings.ledger)
    probes = probe_counts(settings.probe_log)
    lost = read_lost_work(conn, run_id, chain) if chain is not None else None
    audit = audit_activities(conn, run_id, workflow_type, status, acts, probes, strict_models, lost)
    if (reading := destination_audit.load(settings.run_dir, run_id)) is not None:  # chaos read where effects land
        apply_destinations(audit, *reading, acts)
    return audit


def probe_counts(path: Path) -> dict[str, int] | None:
    """Physical writes per effect key from the library's probe log, or None if there is none."""
    if not path.exists():
        return None
    return dict(read_probe_log(path))  # the library's own reader (bounded; torn or foreign lines skipped)


def audit_lines(a: ActivityAudit) -> list[str]:
    """The report, plainly: what ran more than once, which of it was guarded, what is at risk."""
    kind = f" ({a.framework}: {a.model_requests} model requests, {a.tool_calls} tool calls)" if a.framework else ""
    lines = [
        f"workflow {a.workflow_type} {a.workflow_status}{kind} · activities {a.completed}/{a.activities} completed · "
        f"re-executed {len(a.re_executed)} (guarded {len(a.guarded_re_executed)}, AT RISK {len(a.at_risk)}, "
        f"model requests {len(a.model_reruns)}, never ran {len(a.never_ran)})"
    ]
    for r in a.guarded_re_executed:
        lines.append(f"  re-executed, guarded: {audit_names.act(r)} · " + "; ".join(r["effects"]))
    for r in a.effect_once:
        where = ", ".join(d["label"] for d in a.destinations)
        lines.append(f"  re-executed · effect once at {where}: {audit_names.act(r)}")
    for r in a.at_risk:
        lines.append(
            f"  AT RISK: {audit_names.act(r)} ran {r['attempt']} times with no effect through the library: "
            "what it did outside may have happened more than once (name where it lands with --effects)"
        )
    if any(r["class"] == "other" for r in a.at_risk):  # unclassified: it may be a model request after all
        lines.append(
            "  (an activity the lab cannot classify: if it is an agent's model request or tool call, "
            "declare it with --model-activities GLOB / --tool-activities GLOB, or in "
            "[tool.checkpoint-tui] of pyproject.toml)"
        )
    if a.model_reruns:
        strict = " (fails the verdict: --strict-models)" if a.strict_models else " (not a side effect: reported apart)"
        lines.append(f"  model requests re-run {len(a.model_reruns)}, tokens paid twice {a.tokens_paid_again}{strict}")
        lines += [f"    {audit_names.act(r)}" for r in a.model_reruns[:10]]
    for r in a.never_ran:
        lines.append(f"  never ran ({r['why']}): {audit_names.act(r)} · {r['attempt']} attempts, no effect claimed")
    lines += effects_lines(a)
    lines += lost_work_lines(a.lost_work) if a.lost_work else []
    work = f" · LOST WORK {a.lost_work_count}" if a.lost_work else ""  # as the app's counts line says it
    lines.append(f"LOST {a.lost} · DUPLICATED {a.duplicated} · AT RISK {len(a.at_risk)}{work}")
    lines += [f"  {d}" for d in (a.lost_detail + a.duplicated_detail)[:10]]
    return lines


def effects_lines(a: ActivityAudit) -> list[str]:
    """What the ledger, the probe log and the destinations say: nothing here needs history."""
    o, lines = a.outcomes, []
    lines.append(
        f"library effects {a.effects} · applied {o.get('applied', 0)} · skipped {o.get('skipped', 0)} · "
        f"recovered {o.get('recovered', 0)} · interrupted {o.get('interrupted', 0)} · unstamped {len(a.unstamped)}"
        + (f" · refused {o['refused']} (a write that returned instead of running)" if o.get("refused") else "")
    )
    if a.probe_available:
        total = sum(a.probe_writes.values())
        twice = sum(n > 1 for n in a.probe_writes.values())
        lines.append(
            f"probe log: {len(a.probe_writes)} keys · {total} physical writes · entered again by a recovery {twice}"
        )
        lines += [f"  {r}" for r in a.re_entered[:10]]
    else:
        lines.append("probe log: none (no effect went through the library)")
    lines += [
        f"destination {d['label']}: {d['new']} effect(s) landed · duplicates {d['duplicates']}" for d in a.destinations
    ]
    return lines


def apply_destinations(
    audit: ActivityAudit, diffs: list[destination_audit.DestinationDiff], dups: list[dict], acts: list[ActivityExec]
) -> None:
    """The destinations' reading in the run's audit: its duplicates are DUPLICATED (the seed's number), and a
    re-executed call at risk whose effect the destination shows once is "effect once" (it passes). One whose
    effect is nowhere in the destinations (another place, or a destination named wrong) stays at risk; so do
    all of them when a read after the run failed."""
    audit.destinations = [
        {
            "label": d.label,
            "new": d.new,
            "duplicates": d.extra,
            "again": len(d.again),
            **({"error": d.error} if d.error else {}),
        }
        for d in diffs
    ]
    if any(d.error for d in diffs):
        return
    named = {aid for d in dups for aid in d["activity_ids"]}
    seen = destination_audit.effect_seen(diffs, [a for a in acts if a.re_executed]) - named
    audit.effect_once = [r for r in audit.at_risk if r["activity_id"] in seen]
    audit.at_risk = [r for r in audit.at_risk if r["activity_id"] not in seen and r["activity_id"] not in named]
    audit.destination_duplicates = dups
    audit.duplicated_detail += [destination_audit.destination_line(d) for d in dups]
    audit.duplicated += sum(d["extra"] for d in dups)
