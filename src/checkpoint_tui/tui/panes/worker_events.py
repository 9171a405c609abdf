"""Worker events (spawn / kill / died / promote / respawn / adopt / assist) from `worker_events`."""

from __future__ import annotations

import json
import time

from rich.text import Text

from checkpoint_tui.ledger.rows import WorkerEvent
from checkpoint_tui.tui.panes.keyed_table import KeyedTable

COLUMNS = [("time", "time"), ("what", "worker events")]
STYLE = {"kill": "bold red", "died": "bold red", "promote": "green", "respawn": "green", "adopt": "cyan"}


class WorkerEventsPane(KeyedTable):
    TITLE = "worker events"

    def __init__(self) -> None:
        super().__init__(COLUMNS, id="workers")
        self.info = None  # events need no counts line

    def apply(self, events: list[WorkerEvent]) -> None:
        self.sync_records(((str(e.id), e) for e in events), _cells, follow=True)


def describe(e: WorkerEvent) -> str:
    detail: dict = {}
    if e.detail and e.detail.startswith("{"):
        try:
            detail = json.loads(e.detail)
        except json.JSONDecodeError:
            detail = {}
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
        failed = detail.get("failed_activities", [])
        reset = detail.get("sticky_reset")
        sticky = "reset sticky queue" if reset is None else f"reset {len(reset)} run(s)' sticky queue"
        return f"assist for {e.pid_label}: failed {len(failed)} pending activity attempt(s) by id, {sticky}"
    return f"{e.event} {e.pid_label} · {e.detail or ''}"


def _cells(e: WorkerEvent) -> tuple:
    clock = time.strftime("%H:%M:%S", time.localtime(e.at))
    return (clock, Text(describe(e), style=STYLE.get(e.event, "")))
