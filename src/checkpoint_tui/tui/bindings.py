"""The app's keys. The footer shows the keys of the first minutes (n, k, m, h), then `?` and `q`, in
short words: all of them fit 80 columns beside the focused pane's Enter and ^p (fewer hints rather than
cut ones, as htop, k9s and lazygit keep Help and Quit in view). Every key is in the help and the
palette."""

from __future__ import annotations

from textual.binding import Binding, BindingType

BINDINGS: list[BindingType] = [
    Binding("n", "new_run", "New run", id="new-run", tooltip="Start a run (asks for the step count)"),
    Binding("k", "kill_worker", "Kill", id="kill-worker", tooltip="A real SIGKILL of the worker"),
    Binding("m", "kill_marker(1)", "Marker", id="next-marker", tooltip="The history at the next kill marker"),
    Binding("M", "kill_marker(-1)", "Previous kill marker", show=False, id="previous-marker"),
    Binding("h", "swap_panes", "Swap", id="swap-panes", tooltip="Below 110 columns: history ⇄ timeline"),
    Binding("c", "cancel_run", "Cancel", show=False, id="cancel-run"),
    Binding("f", "faults", "Faults", show=False, id="faults"),
    Binding("r", "runs", "Runs", show=False, id="runs"),
    Binding("v", "lesson", "Naive vs durable", show=False, id="lesson"),
    Binding("x", "chaos", "Chaos", show=False, id="chaos"),
    Binding("question_mark", "help", "Help", id="help", tooltip="Every key and pane"),
    Binding("f1", "help", "Help", show=False, id="help-f1"),
    Binding("q", "quit_keep", "Quit", id="quit", tooltip="The worker and the dev server keep running"),
    Binding("ctrl+q", "quit_stop", "Quit + stop all", show=False, id="quit-stop", priority=True),
]
