"""A run's lost work as printed lines (core/lost_work.py's report): timeouts waited out with their waits
and causes, workflow task failures, the workflow's end, schedule-to-start latency."""

from __future__ import annotations


def lost_work_lines(doc: dict, limit: int = 10) -> list[str]:
    """The report's lost-work section, from LostWork.to_dict(): timeouts waited out (with their waits
    and causes), workflow task failures (why, how long stuck), the workflow's end, schedule-to-start."""
    outs, fails, end = doc.get("timeouts") or [], doc.get("task_failures") or [], doc.get("outcome")
    lines = [
        f"lost work {doc.get('lost', 0)} · timeouts waited out {doc.get('timeouts_total', len(outs))} "
        f"(lost {sum(t['lost'] for t in outs)}) · workflow task failures {doc.get('task_failures_total', 0)} "
        f"(still failing {sum(f['lost'] for f in fails)}) · schedule-to-start {_latency(doc)}"
    ]
    if ran := doc.get("versions"):  # Worker Versioning: which version ran the workflow tasks
        lines.append("  workflow tasks by version: " + " · ".join(f"{k} {n}" for k, n in list(ran.items())[:limit]))
    lines += [f"  {'LOST' if t['lost'] else 'waited out'}: {t['line']}" for t in outs[:limit]]
    lines += [f"  {'LOST' if f['lost'] else 'recovered'}: {f['line']}" for f in fails[:limit]]
    return lines + ([f"  {'LOST' if end['lost'] else 'ended'}: {end['line']}"] if end else [])


def _latency(doc: dict) -> str:
    parts = []
    for key, name in (("activity", "activities"), ("workflow_task", "workflow tasks")):
        if lat := (doc.get("schedule_to_start") or {}).get(key):
            parts.append(f"{name} p50 {lat['p50_s']:.3f} s p99 {lat['p99_s']:.3f} s ({lat['samples']})")
    return " · ".join(parts) or "no sample"
