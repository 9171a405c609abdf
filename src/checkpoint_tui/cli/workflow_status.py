"""`status RUN` for a run of a user's workflow: the ledger's row and the library's effects, and, when
Temporal can be reached (status never starts a server), the activities from history with the audit."""

from __future__ import annotations

from temporalio.service import RPCError

from checkpoint_tui.app.activity_audit import audit_activities, audit_lines, probe_counts
from checkpoint_tui.app.activity_history import ActivityExec, read_activities
from checkpoint_tui.app.history import workflow_status
from checkpoint_tui.app.snapshot import build_snapshot
from checkpoint_tui.app.workflow_runs import workflow_type_of
from checkpoint_tui.errors import CheckpointError
from checkpoint_tui.ledger.rows import RunRow
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops import devserver
from checkpoint_tui.ops.temporal import connect_client
from checkpoint_tui.ops.user_worker import probe_log_path
from checkpoint_tui.settings import Settings


async def _peek(
    settings: Settings, run_id: str, framework: str | None = None
) -> tuple[str | None, list[ActivityExec] | None]:
    """(Temporal's status, the activities) if a server is reachable, else (None, None)."""
    if settings.embedded:
        ident, rec = devserver.recorded(settings)
        if ident is None or rec is None:
            return None, None
        address = rec["address"]
    else:
        address = settings.temporal_address or ""
    try:
        client = await connect_client(settings, address, timeout=3.0)
        return await workflow_status(client, run_id), await read_activities(client, run_id, framework=framework)
    except (CheckpointError, RPCError):
        return None, None


async def user_workflow_status(settings: Settings, row: RunRow, framework: str | None = None) -> tuple[dict, str]:
    """(the --json document, the text) of one run of a user's workflow; its verdict is the audit's."""
    wf_status, acts = await _peek(settings, row.run_id, framework)
    conn = connect(settings.ledger)
    snap = build_snapshot(conn, settings, row.run_id, wf_status)
    workflow = workflow_type_of(row.provider)
    audit = audit_activities(conn, row.run_id, workflow, wf_status, acts or [], probe_counts(probe_log_path(settings)))
    doc = {
        **snap.status_json(),
        "workflow_type": workflow,
        "task_queue": row.task_queue,
        "activities": None if acts is None else [a.to_dict() for a in acts],
        "audit": audit.to_dict(),
        "completion": audit.sentence() if acts is not None else None,
    }
    lines = [
        f"run       {row.run_id} · workflow {workflow} (your worker) · task queue {row.task_queue}",
        f"temporal  {wf_status or 'unreachable or unknown'} · ledger {row.status}"
        + (f" · {row.error}" if row.error else ""),
    ]
    if acts is None:
        lines.append("activities: unknown (Temporal could not be reached; status never starts a server)")
    else:
        for a in acts[-20:]:
            took = "" if a.duration_s is None else f" {a.duration_s:.2f}s"
            mark = " ⚑ resumed here" if a.resumed else ""
            lines.append(f"  #{a.seq:<4} {a.label:<40} {a.status:<10} attempt {a.attempt} "
                         f"{a.identity or '-'}{took}{mark}")  # fmt: skip
    lines += audit_lines(audit)
    if acts is not None and (sentence := audit.sentence()):
        lines.append(sentence)
    return doc, "\n".join(lines)
