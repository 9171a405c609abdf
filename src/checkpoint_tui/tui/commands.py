"""The app's entries in the command palette (ctrl+p): every action a key starts, findable by name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from textual.app import SystemCommand


def lab_commands(app: Any) -> Iterator[SystemCommand]:
    """`app` is the CheckpointApp (not imported: it imports this module)."""
    yield SystemCommand("New run", "Start a run (asks for the step count)", app.action_new_run)
    yield SystemCommand("Kill worker", "A real SIGKILL of the worker process", app.action_kill_worker)
    yield SystemCommand("Next kill marker", "The history pane at the next kill", lambda: app.action_kill_marker(1))
    yield SystemCommand(
        "Previous kill marker", "The history pane at the previous kill", lambda: app.action_kill_marker(-1)
    )
    yield SystemCommand("Swap panes", "Below 110 columns: history ⇄ timeline", app.action_swap_panes)
    yield SystemCommand("Cancel run", "Cancel the viewed run", app.action_cancel_run)
    yield SystemCommand("Plan a fault", "transient / garble / crash-after-claim / kill-at-step", app.action_faults)
    yield SystemCommand("Runs", "Switch the viewed run", app.action_runs)
    yield SystemCommand(
        "Inspect step",
        "The timeline's selected step in full: decision, effects, claims, attempts, history",
        app.action_inspect_step,
    )
    yield SystemCommand(
        "Chaos schedule",
        "A seeded schedule of kills (worker, claim window, supervisor, dev server)",
        app.action_chaos,
    )
    yield SystemCommand(
        "Naive vs durable, step by step", "Next step / Kill / Restart and finish on both sides", app.action_lesson
    )
    yield SystemCommand(
        "Naive vs durable, automatic",
        "The same kill applied to a naive loop and a durable run",
        app.action_compare,
    )
    yield SystemCommand("Quit and stop everything", "Stop the worker and the dev server", app.action_quit_stop)
