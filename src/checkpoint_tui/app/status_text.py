"""`checkpoint-tui status` as text: one line per figure, every figure from the Snapshot."""

from __future__ import annotations

from checkpoint_tui.app.view import Snapshot
from checkpoint_tui.settings import Settings


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
