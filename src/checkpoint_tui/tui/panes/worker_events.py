"""Worker events (spawn / kill / died / promote / respawn / adopt / assist, and a fleet's sigterm / exit and
chaos's fleet events) from `worker_events`. With a user's workers, a line above them: the fleet's commands
(live workers, deployed, held down) and the task queues' backlog; hidden otherwise."""

from __future__ import annotations

import time

from rich.text import Text

from checkpoint_tui.core.fleet_marks import words
from checkpoint_tui.core.view import Backlog, FleetCommand
from checkpoint_tui.ledger.rows import WorkerEvent, detail_of
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.panes.pane_info import PaneInfo

COLUMNS = [("time", "time"), ("what", "worker events")]
STYLE = {
    "kill": "bold red",
    "died": "bold red",
    "promote": "green",
    "respawn": "green",
    "adopt": "cyan",
    "sigterm": "yellow",
    "exit": "yellow",
}
CHAOS_STYLE = "bold yellow"  # chaos's own record of a nemesis it fired
QUEUE_CHARS = 40  # a queue's name in the fleet lines (at most 200 characters)


class WorkerEventsPane(KeyedTable):
    TITLE = "worker events"

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="workers")
        self.info = PaneInfo(id="workers-info")  # the fleet and backlog lines, shown only when there are some
        self.info.display = False
        self._info_lines = 0  # the lines the info shows (0: hidden)

    def apply(
        self, events: list[WorkerEvent], fleet: list[FleetCommand] | None = None, backlog: Backlog | None = None
    ) -> None:
        self.sync_records(((str(e.id), e) for e in events), _cells, follow=True)
        text = fleet_text(fleet, backlog)
        lines = 0 if text is None else text.plain.count("\n") + 1
        changed = lines != self._info_lines
        if changed:  # shown, hidden or a line more: a layout pass, rarely
            self._info_lines = lines
            self.info.display = bool(lines)
            self.info.styles.height = max(1, lines)
        if text is not None:
            self.info.show(text, now=changed)


def fleet_text(fleet: list[FleetCommand] | None, backlog: Backlog | None) -> Text | None:
    """A line per command of a fleet (`fleet-activities  1/2 live · deployed · down until 12:00:10`),
    then `backlog 3 (fleet-activities 3)`; None with neither a fleet nor a backlog read."""
    if not fleet and backlog is None:
        return None
    lines = []
    width = min(QUEUE_CHARS, max((len(c.queue) for c in fleet or []), default=0))
    for c in fleet or []:
        t = Text(c.queue.ljust(width) if len(c.queue) <= width else c.queue[: width - 1] + "…")  # plain text
        t.append(f"  {c.live}/{c.slots} live", style="" if c.live == c.slots else "bold yellow")
        if c.deployed:
            t.append(" · deployed", style="bold cyan")
        if c.down_until is not None:
            t.append(f" · down until {time.strftime('%H:%M:%S', time.localtime(c.down_until))}", style="bold red")
        lines.append(t)
    if backlog is not None:
        lines.append(backlog_text(backlog))
    return Text("\n").join(lines)


def backlog_text(backlog: Backlog) -> Text:
    """`backlog 3 (fleet-activities 3)`: the queues with tasks waiting named, an empty one not."""
    waiting = [f"{queue} {n}" for queue, n in backlog.queues if n]
    return Text(
        f"backlog {backlog.total}" + (f" ({', '.join(waiting)})" if waiting else ""),
        style="bold yellow" if backlog.total else "",
    )


def describe(e: WorkerEvent) -> str:
    detail = detail_of(e.detail)
    at_step = f" · at step {e.step}" if e.step else ""
    latency = ""
    if e.restart_s is not None:
        latency = f" · restart {e.restart_s:.2f} s"
    if e.next_step_s is not None:
        latency += f" · next step {e.next_step_s:.2f} s"
    if e.event in ("kill", "died"):
        sig = detail.get("signal") or "unknown"
        how = "killed" if e.event == "kill" else "died"
        seen = "observed signal" if detail.get("observed") else "signal"
        code = detail.get("exit_code")
        code_text = code if code is not None else "none"
        return f"worker {e.pid_label} {how} · {seen} {sig} · exit code {code_text}{at_step}{latency}"
    if e.event in ("promote", "respawn"):
        how = "warm spare promoted" if e.event == "promote" else "respawned"
        return f"replacement {e.pid_label} polling ({how}) · {e.detail}"
    if e.event == "assist":
        failed, reset = _count(detail, "failed_activities"), _count(detail, "sticky_reset")
        sticky = "reset sticky queue" if reset is None else f"reset {reset} run(s)' sticky queue"
        if detail.get("by") == "hop":  # chaos's hop (proof/nemeses/handed.py): it resets no sticky queue
            how = "by id (the hop's late pass)" if detail.get("by_id") else "by task token (chaos's hop)"
            return f"assist for {e.pid_label}: failed {failed or 0} pending activity attempt(s) {how}"
        return f"assist for {e.pid_label}: failed {failed or 0} pending activity attempt(s) by id, {sticky}"
    if (said := words(e.event, detail, e.pid_label)) is not None:
        return f"chaos {said}" if e.event.startswith("chaos:") else said
    return f"{e.event} {e.pid_label} · {e.detail or ''}"


def _count(detail: dict, name: str) -> int | None:
    """How many an assist's list named: its `<name>_count` (the list is cut at the writer), else the
    list's length; None when the detail says nothing of it (an older row, a hostile one)."""
    count, items = detail.get(f"{name}_count"), detail.get(name)
    if type(count) is int and count >= 0:
        return count
    return len(items) if isinstance(items, list) else None


def _cells(e: WorkerEvent) -> tuple:
    clock = time.strftime("%H:%M:%S", time.localtime(e.at))
    style = CHAOS_STYLE if e.event.startswith("chaos:") and words(e.event, {}, "") else STYLE.get(e.event, "")
    return (clock, Text(describe(e), style=style))
