"""The chaos screen: the seeded schedule as the `chaos` command prints it, each event ticked off as the
chaos run's completed steps (read from its ledger) pass it, and at the end the Jepsen-style counts
from the report file chaos writes. The chaos itself runs in the app's worker (closing this screen
does not stop it; `x` shows it again)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from checkpoint_tui.tui.screens import Dialog

_EVENT = re.compile(r"^\s+step\s+(\d+):")
_RUN = re.compile(r"^run (\S+)$")
TICK_S = 0.5


class ChaosScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,x", "dismiss", "Close", id="close-chaos")]

    def __init__(self, seed: int, steps: int, kills: int, progress: Callable[[str], Awaitable[int]]) -> None:
        super().__init__()
        self.seed, self.steps, self.kills = seed, steps, kills
        self.progress = progress  # completed steps of the chaos run, from its ledger
        self.schedule: list[tuple[int, str]] = []  # (step, the line chaos printed)
        self.run_id: str | None = None
        self.done_steps = 0
        self.report: dict | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="chaos"):
            with VerticalScroll(id="chaos-scroll"):
                yield Static(self.render_text(), id="chaos-text")
            with Horizontal():
                yield Button("Close (chaos keeps running)", id="close")

    def on_mount(self) -> None:
        self.set_interval(TICK_S, self.tick)

    def add_line(self, line: str) -> None:
        """A line chaos printed: a schedule event, the run id, or the report's own lines (ignored here:
        the counts are read from the report file)."""
        event = _EVENT.match(line)
        run = _RUN.match(line)
        if event:
            self.schedule.append((int(event[1]), line.strip()))
        elif run:
            self.run_id = run[1]
        else:
            return
        self.show()

    async def tick(self) -> None:
        if self.run_id is None or self.report is not None:
            return
        try:
            self.done_steps = await self.progress(self.run_id)
        except Exception:  # the chaos ledger not there yet, or its server killed: the next tick asks again
            return
        self.show()

    def finished(self, report: dict | None, error: str | None = None) -> None:
        self.report, self.error = report, error
        if report is not None:
            self.done_steps = report["audit"]["total_steps"] - len(report["audit"]["step_gaps"])
        self.show()

    def show(self) -> None:
        for body in self.query("#chaos-text").results(Static):  # none until the screen is composed
            body.update(self.render_text())

    def render_text(self) -> Text:
        t = Text()
        t.append(f"chaos seed {self.seed}: {self.steps} steps, {self.kills} kills", style="bold")
        t.append(" (worker, claim window, supervisor, dev server) in run/chaos\n")
        t.append(f"run {self.run_id or '(starting)'} · {self.done_steps}/{self.steps} steps completed\n\n")
        t.append("schedule (seeded: the same seed gives the same schedule)\n", style="bold underline")
        if not self.schedule:
            t.append("  waiting for chaos to print it…\n")
        for step, line in self.schedule:
            passed = self.done_steps >= step
            t.append("  ✓ " if passed else "  · ", style="green" if passed else "grey50")
            t.append(line + "\n", style="" if passed else "grey62")
        if self.error:
            t.append(f"\nchaos failed to run: {self.error}\n", style="bold red")
        if self.report is not None:
            result_text(t, self.report)
        return t

    @on(Button.Pressed, "#close")
    def close(self) -> None:
        self.dismiss(None)


def result_text(t: Text, report: dict) -> None:
    """The Jepsen-style counts of the report chaos wrote."""
    a = report["audit"]
    ok = a["ok"]
    t.append("\nresult (from the report chaos wrote)\n", style="bold underline")
    t.append(f"  workflow {a['workflow_status']} · steps {a['total_steps'] - len(a['step_gaps'])}/{a['total_steps']}\n")
    t.append(
        f"  claims attempted {a['claims_attempted']} · applied {a['applied']} · skipped {a['skipped']} · "
        f"recovered {a['recovered']} · interrupted {a['interrupted']}\n"
    )
    bad = a["lost"] or a["duplicated"] or a["step_gaps"]
    t.append(
        f"  LOST {a['lost']} · DUPLICATED {a['duplicated']} · step gaps {a['step_gaps']}\n",
        style="bold red" if bad else "bold green",
    )
    for k in report.get("kills", []):
        r = "none" if k.get("restart_s") is None else f"{k['restart_s']:.2f} s"
        aimed = k.get("aimed")  # the schedule's step, where it struck later (proof/chaos/loop_target.py)
        late = f" (scheduled at step {aimed})" if type(aimed) is int and aimed != k.get("step") else ""
        t.append(
            f"  kill {k.get('kind', '?'):<26} step {k.get('step', '?'):>4}{late} pid {k.get('pid', '?'):>7} "
            f"-> resumed after {r}\n"
        )
    median = report.get("median_restart_s")
    t.append(
        f"  median restart {'—' if median is None else f'{median:.2f} s'} · wall {report.get('wall_s', 0):.1f} s · "
    )
    t.append("PASS" if ok else "FAIL", style="bold green" if ok else "bold red")
    t.append("\n")


def status_counts(seed: int, report: dict) -> str:
    a = report["audit"]
    return (
        f"chaos seed {seed}: {a['workflow_status']} · lost {a['lost']} · duplicated {a['duplicated']} · "
        f"gaps {len(a['step_gaps'])} · {len(report['kills'])} kills · {'PASS' if a['ok'] else 'FAIL'}"
    )
