"""Build one Snapshot of a run from durable data only (the ledger and the artifact files). The TUI,
`status`, `--verify` and `chaos` all read it."""

from __future__ import annotations

from checkpoint_tui.core.view import Snapshot
from checkpoint_tui.ledger import inspect_queries, queries
from checkpoint_tui.ledger.artifacts import count_step_files, outbox_counts, outbox_path
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import worker_label
from checkpoint_tui.settings import Settings


class UnknownRun(LookupError):
    """The run id names no run in this ledger."""


def build_snapshot(
    conn: Ledger,
    settings: Settings,
    run_id: str | None,
    workflow_status: str | None = None,
    with_events: int = 50,
    since: float | None = None,
    events_after: int | None = None,
) -> Snapshot:
    """All figures are computed over the whole run. With `since` (a poller that updates tables by key),
    the row lists hold only rows written since, worker events only those after `events_after`, the
    figures come from counts (no list of every step) and the files' counts from what was appended:
    work per refresh that does not grow with the run. Without it, everything is read and counted
    from scratch (status, verify, chaos)."""
    if run_id is None:
        return Snapshot(run_id=None, worker_events=queries.worker_events(conn, None, with_events, after=events_after))
    run = queries.run(conn, run_id)
    if run is None:
        raise UnknownRun(f"no run {run_id!r} in {settings.ledger_label}")
    snap = Snapshot(
        run_id=run_id,
        total_steps=run.total_steps,
        run_status=run.status,
        provider=run.provider,
        pace=run.pace,
        run_error=run.error,
        workflow_status=workflow_status,
        partial=since is not None,
        workflow_type=run.workflow_type,
    )
    snap.steps, snap.truncated_steps = inspect_queries.steps_with_notes(conn, run_id, since)
    exact = since is None
    if exact:
        done = set(queries.completed_steps(conn, run_id))
        snap.completed_steps = len(done)
        snap.missing_steps = [i for i in range(1, snap.total_steps + 1) if i not in done]
    else:
        snap.completed_steps = queries.count_completed(conn, run_id)
    snap.guardrail_step = queries.guardrail_step(conn, run_id)
    totals = queries.effect_totals(conn, run_id)
    snap.ledger_rows, snap.duplicates, snap.unstamped = totals.rows, totals.duplicates, totals.unstamped
    snap.outcome_counts = queries.outcome_counts(conn, run_id)
    snap.effects = queries.effects(conn, run_id, since)
    notes = queries.note_totals(conn, run_id)
    snap.notes_rows, snap.notes_duplicates = notes.rows, notes.duplicates
    snap.outbox_lines, snap.outbox_duplicates = outbox_counts(outbox_path(settings.artifacts_dir, run_id), exact)
    snap.artifact_files = count_step_files(settings.artifacts_dir / run_id, exact)
    if exact:  # who worked on the run: for status and the proofs (the panes show pids per row)
        workers = queries.step_workers(conn, run_id)
        snap.worker_pids = list(dict.fromkeys(pid for _, pid in workers))
        snap.workers = [worker_label(pid, host) for host, pid in workers]
    first_changed = min((s.step for s in snap.steps), default=None)
    if exact or first_changed is not None:  # the resumed marks of the changed steps (and what follows)
        snap.resumed_steps = queries.resumed_steps(conn, run_id, None if exact else first_changed)
    snap.worker_events = queries.worker_events(conn, run_id, with_events, after=events_after)
    return snap
