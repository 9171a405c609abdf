"""The audit of a user's workflow run as printed lines (chaos, `status`, the app's report pane)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checkpoint_tui.core.audit_names import act

if TYPE_CHECKING:
    from checkpoint_tui.core.activity_audit import ActivityAudit


def audit_lines(a: ActivityAudit) -> list[str]:
    """The report, plainly: what ran more than once, which of it was guarded, what is at risk."""
    kind = f" ({a.framework}: {a.model_requests} model requests, {a.tool_calls} tool calls)" if a.framework else ""
    lines = [
        f"workflow {a.workflow_type} {a.workflow_status}{kind} · activities {a.completed}/{a.activities} completed · "
        f"re-executed {len(a.re_executed)} (guarded {len(a.guarded_re_executed)}, AT RISK {len(a.at_risk)}, "
        f"model requests {len(a.model_reruns)}, never ran {len(a.never_ran)})"
    ]
    for r in a.guarded_re_executed:
        lines.append(f"  re-executed, guarded: {act(r)} · " + "; ".join(r["effects"]))
    for r in a.effect_once:
        lines.append(f"  re-executed · effect once at {', '.join(d['label'] for d in a.destinations)}: {act(r)}")
    for r in a.at_risk:
        lines.append(
            f"  AT RISK: {act(r)} ran {r['attempt']} times with no effect through the library: "
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
        lines += [f"    {act(r)}" for r in a.model_reruns[:10]]
    for r in a.never_ran:
        lines.append(f"  never ran ({r['why']}): {act(r)} · {r['attempt']} attempts, no effect claimed")
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
    lines += [
        f"destination {d['label']}: {d['new']} effect(s) landed · duplicates {d['duplicates']}" for d in a.destinations
    ]
    lines += lost_work_lines(a.lost_work) if a.lost_work else []
    work = f" · LOST WORK {a.lost_work_count}" if a.lost_work else ""  # as the app's counts line says it
    lines.append(f"LOST {a.lost} · DUPLICATED {a.duplicated} · AT RISK {len(a.at_risk)}{work}")
    lines += [f"  {d}" for d in (a.lost_detail + a.duplicated_detail)[:10]]
    return lines


def lost_work_lines(doc: dict, limit: int = 10) -> list[str]:
    """The report's lost-work section, from LostWork.to_dict(): timeouts waited out (with their waits
    and causes), workflow task failures (why, how long stuck), the workflow's end, schedule-to-start."""
    outs, fails, end = doc.get("timeouts") or [], doc.get("task_failures") or [], doc.get("outcome")
    lines = [
        f"lost work {doc.get('lost', 0)} · timeouts waited out {doc.get('timeouts_total', len(outs))} "
        f"(lost {sum(t['lost'] for t in outs)}) · workflow task failures {doc.get('task_failures_total', 0)} "
        f"(still failing {sum(f['lost'] for f in fails)}) · schedule-to-start {_latency(doc)}"
    ]
    lines += [f"  {'LOST' if t['lost'] else 'waited out'}: {t['line']}" for t in outs[:limit]]
    lines += [f"  {'LOST' if f['lost'] else 'recovered'}: {f['line']}" for f in fails[:limit]]
    return lines + ([f"  {'LOST' if end['lost'] else 'ended'}: {end['line']}"] if end else [])


def _latency(doc: dict) -> str:
    parts = []
    for key, name in (("activity", "activities"), ("workflow_task", "workflow tasks")):
        if lat := (doc.get("schedule_to_start") or {}).get(key):
            parts.append(f"{name} p50 {lat['p50_s']:.3f} s p99 {lat['p99_s']:.3f} s ({lat['samples']})")
    return " · ".join(parts) or "no sample"
