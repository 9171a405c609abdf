"""`checkpoint-tui status` as text, one line per figure: a run of our loop from its Snapshot; a run of a
user's workflow from its Snapshot (the library's effects), its activities from history and its audit."""

from __future__ import annotations

from checkpoint_tui.core.activity_audit import ActivityAudit, effects_lines
from checkpoint_tui.core.activity_history import ActivityExec
from checkpoint_tui.core.view import Snapshot
from checkpoint_tui.ledger.rows import RunRow
from checkpoint_tui.settings import Settings

SHOWN_ACTIVITIES = 20  # the newest activities listed (all of them in --json)
NO_VERDICT = "no verdict: Temporal's history could not be read, so LOST, DUPLICATED and AT RISK are not counted"


def no_runs(settings: Settings) -> str:
    return f"no runs yet in {settings.home}; start one with `checkpoint-tui start` (or `make run`, then n)"


def format_status(snap: Snapshot) -> str:
    j = snap.status_json()
    lines = [
        f"run            {j['run_id']}",
        f"workflow       {j['workflow_status'] or 'unknown (Temporal not reachable)'}  (ledger: {j['run_status']})",
        f"steps          {j['completed_steps']}/{j['total_steps']} completed"
        + (f", missing {j['missing_steps']}" if j["missing_steps"] and j["run_status"] != "running" else ""),
        f"ledger         {j['ledger_rows']} rows · duplicates {j['duplicates']} · unstamped {j['unstamped_effects']}",
        "claims         " + " · ".join(f"{k} {v}" for k, v in j["outcomes"].items()),
        f"outbox         {j['outbox_lines']} lines · {j['outbox_duplicates']} repeated",
        f"notes          {j['notes_rows']} rows · {j['notes_duplicates']} repeated",
        f"artifacts      {j['artifact_files']} step files",
        f"workers        {', '.join(j['workers']) or '-'}"
        + (f"  (resumed at step {', '.join(map(str, j['resumed_steps']))})" if j["resumed_steps"] else ""),
        f"provider       {j['provider']}",
    ]
    if j["error"]:
        lines.append(f"error          {j['error']}")
    sentence = snap.completion_sentence()  # a whole snapshot: its step rows name who completed each step
    if sentence:
        lines.append(f"result         {sentence}")
    return "\n".join(lines)


def activity_status(
    row: RunRow, snap: Snapshot, wf_status: str | None, acts: list[ActivityExec] | None, audit: ActivityAudit
) -> tuple[dict, str]:
    """(the --json document, the text) of a run of a user's workflow; its verdict is the audit's.
    `acts` None: Temporal could not be reached."""
    doc = {
        **snap.status_json(),
        "workflow_type": row.workflow_type,
        "task_queue": row.task_queue,
        "activities": None if acts is None else [a.to_dict() for a in acts],
        "audit": audit.to_dict() if acts is not None else None,  # no history: no counts to stand on
        "completion": audit.sentence() if acts is not None else None,
    }
    lines = [
        f"run       {row.run_id} · workflow {row.workflow_type} (your worker) · task queue {row.task_queue}",
        f"temporal  {wf_status or 'unreachable or unknown'} · ledger {row.status}"
        + (f" · {row.error}" if row.error else ""),
    ]
    if acts is None:
        lines.append("activities: unknown (Temporal could not be reached; status never starts a server)")
    else:
        for a in acts[-SHOWN_ACTIVITIES:]:
            took = "" if a.duration_s is None else f" {a.duration_s:.2f}s"
            mark = " ⚑ resumed here" if a.resumed else ""
            lines.append(
                f"  #{a.seq:<4} {a.label:<40} {a.status:<10} attempt {a.attempt} {a.identity or '-'}{took}{mark}"
            )
    if acts is None:  # what ran twice, was lost or is at risk is read from history: none of it is counted
        lines += effects_lines(audit)
        lines.append(f"{NO_VERDICT} (the ledger alone: duplicates {audit.duplicate_ids})")
        return doc, "\n".join(lines)
    lines += audit.lines()
    if sentence := audit.sentence():
        lines.append(sentence)
    return doc, "\n".join(lines)
