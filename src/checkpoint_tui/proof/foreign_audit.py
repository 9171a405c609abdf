"""The audit of a user's workflow run, with or without the effects library.

What it can see, and from where:
- **re-executed** (from Temporal history): every activity whose closing attempt is > 1, i.e. that
  ran more than once (a retry, or a worker killed under it and the activity started again).
- **guarded**: the activity made at least one claim attempt through the library (an
  `effect_outcomes` row of the run with `step` = its activity id). A re-executed activity without
  one is **at risk**: whatever it did to the outside world may have happened once per attempt, and
  the lab cannot see it.
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

from checkpoint_tui.app.foreign_history import ActivityExec
from checkpoint_tui.effects import read_probe_log
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import EffectRow

DETAIL_LIMIT = 200  # lines of detail kept per list (a long run's report stays readable)


@dataclass
class ForeignAudit:
    run_id: str
    workflow_type: str | None
    workflow_status: str | None
    activities: int = 0
    completed: int = 0
    re_executed: list[dict] = field(default_factory=list)  # each: the activity, guarded or not, its effects
    at_risk: list[dict] = field(default_factory=list)  # re-executed with no guarded effect
    guarded_re_executed: list[dict] = field(default_factory=list)
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

    @property
    def ok(self) -> bool:
        return self.workflow_status == "COMPLETED" and not self.lost and not self.duplicated and not self.at_risk

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}


def audit_foreign(
    conn: Ledger,
    run_id: str,
    workflow_type: str | None,
    workflow_status: str | None,
    acts: list[ActivityExec],
    probe_counts: dict[str, int] | None,
) -> ForeignAudit:
    """`acts` from history (app/foreign_history.py); `probe_counts` the probe log's writes per key, or
    None when there is no probe log (a worker that does not use the library)."""
    a = ForeignAudit(run_id, workflow_type, workflow_status, len(acts), sum(x.status == "completed" for x in acts))
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
        (a.guarded_re_executed if guarded else a.at_risk).append(entry)
    _ledger_checks(a, effects)
    _probe_checks(a, effects)
    a.lost, a.duplicated = len(a.lost_detail), len(a.duplicated_detail)
    for name in ("lost_detail", "duplicated_detail", "re_executed", "at_risk", "guarded_re_executed", "re_entered"):
        setattr(a, name, getattr(a, name)[:DETAIL_LIMIT])
    return a


def _effect_line(e: EffectRow, a: ForeignAudit) -> str:
    writes = f" · {a.probe_writes.get(e.id, 0)} physical write(s)" if a.probe_available else ""
    return f"{e.id} ({e.kind}) {e.outcomes or 'no claim outcome'}{writes}"


def _ledger_checks(a: ForeignAudit, effects: list[EffectRow]) -> None:
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


def _probe_checks(a: ForeignAudit, effects: list[EffectRow]) -> None:
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


def probe_counts(path: Path) -> dict[str, int] | None:
    """Physical writes per effect key from the library's probe log, or None if there is none."""
    if not path.exists():
        return None
    return dict(read_probe_log(path))  # the library's own reader (bounded; torn or foreign lines skipped)


def audit_lines(a: ForeignAudit) -> list[str]:
    """The report, plainly: what ran more than once, which of it was guarded, what is at risk."""
    lines = [
        f"workflow {a.workflow_type} {a.workflow_status} · activities {a.completed}/{a.activities} completed · "
        f"re-executed {len(a.re_executed)} (guarded {len(a.guarded_re_executed)}, AT RISK {len(a.at_risk)})"
    ]
    for r in a.guarded_re_executed:
        lines.append(f"  re-executed, guarded: {_act(r)} · " + "; ".join(r["effects"]))
    for r in a.at_risk:
        lines.append(
            f"  AT RISK: {_act(r)} ran {r['attempt']} times with no effect through the library: "
            "what it did outside may have happened more than once"
        )
    o = a.outcomes
    lines.append(
        f"library effects {a.effects} · applied {o.get('applied', 0)} · skipped {o.get('skipped', 0)} · "
        f"recovered {o.get('recovered', 0)} · interrupted {o.get('interrupted', 0)} · unstamped {len(a.unstamped)}"
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
    lines.append(f"LOST {a.lost} · DUPLICATED {a.duplicated} · AT RISK {len(a.at_risk)}")
    lines += [f"  {d}" for d in (a.lost_detail + a.duplicated_detail)[:10]]
    return lines


def _act(r: dict) -> str:
    failure = f" (before: {r['last_failure'][:80]})" if r.get("last_failure") else ""
    return f"#{r['seq']} {r['type']} activity {r['activity_id']} attempt {r['attempt']} on {r['identity']}{failure}"
