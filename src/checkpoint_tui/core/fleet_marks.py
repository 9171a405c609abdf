"""The lab's fleet events in words, and where they fall in a run's history: a graceful stop (`sigterm`)
and the stopped worker's `exit`, a fleet-down, a deploy, a dependency fault (proof/nemeses/fleet.py and
chaos record them), and the two that reach every run at once: the dev server's death and a
partition. The history pane marks each like a kill (core/kill_marker.py) and the worker events pane
lists it, in the same words; both read the ledger's worker events, so an app started later shows
the same. Every name comes from the ledger, which anyone who can write the home can edit: each is cut
short here and shown as plain text by the panes."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.ledger.inspect_queries import FleetEvent

NAME_CHARS = 60  # a queue or dependency name in a line (a queue name may be 200 characters)
STOPS = {"graceful-restart": "graceful restart", "churn": "churn restart", "deploy": "deploy restart"}


def words(event: str, detail: Mapping, who: str) -> str | None:
    """What a fleet event says (`who`: the worker's pid label), or None for any other event."""
    queue = _name(detail.get("queue"))
    on = f" on {queue}" if queue else ""
    if event == "sigterm":
        grace = _number(detail.get("grace_s"))
        after = f", {grace:g} s grace" if grace is not None else ""
        return f"{STOPS.get(str(detail.get('nemesis')), 'graceful stop')} of worker {who}{on} · SIGTERM{after}"
    if event == "exit":
        signal, code = _name(detail.get("signal")), detail.get("exit_code")
        if signal == "SIGKILL":
            return f"worker {who}{on} SIGKILLed when its SIGTERM grace ran out"
        if signal:  # the signal itself ended it: the command has no graceful shutdown
            return f"worker {who}{on} ended by {signal}"
        return f"worker {who}{on} exited after its SIGTERM · exit code {code if isinstance(code, int) else '?'}"
    if event.startswith("chaos:"):
        return _chaos(event.removeprefix("chaos:"), detail, queue)
    return None


def _chaos(kind: str, detail: Mapping, queue: str | None) -> str | None:
    fleet = f"every worker of {queue}" if queue and queue != "all" else "every worker of the fleet"
    duration = _number(detail.get("duration_s"))
    lasting = f" {duration:g} s" if duration is not None else ""
    if kind == "fleet-down":
        killed = detail.get("workers")
        n = f" ({len(killed)} SIGKILLed)" if isinstance(killed, list) else ""
        return f"fleet-down: {fleet} down{lasting}{n}"
    if kind == "deploy":
        rolled = detail.get("deployed")
        n = f" ({len(rolled)} worker{'' if len(rolled) == 1 else 's'} rolled)" if isinstance(rolled, list) else ""
        back = _number(detail.get("rolled_back_at"))
        start = _number(detail.get("deployed_at"))
        later = f" · rolled back {back - start:.0f} s later" if back is not None and start is not None else ""
        if to := _name(detail.get("to")):  # Worker Versioning: routed, not rolled
            ramp = _number(detail.get("ramp_percent"))
            ramped = f" after a {ramp:g}% ramp" if ramp is not None else ""
            return f"deploy: {_name(detail.get('deployment')) or '?'} version {to} current{ramped}{later}"
        return f"deploy: {queue or 'the workflow queue'} → its new version{n}{later}"
    if kind == "dependency":
        fault = f"{_name(detail.get('fault')) or '?'}" + (f" for{lasting}" if lasting else "")
        return f"dependency {_name(detail.get('dependency')) or '?'}: {fault}"
    if kind == "churn":
        restarts = detail.get("restarts")
        n = f" {restarts}" if isinstance(restarts, int) else ""
        where = queue if queue and queue != "all" else "the fleet"
        return f"churn:{n} graceful restarts across {where}" + (f" over{lasting}" if lasting else "")
    if kind == "graceful-restart":
        return f"graceful restart of worker {_name(detail.get('identity')) or '?'}"
    if kind == "temporal-server":  # the supervisor restarts it; the worker events say when it was back
        how = _name(detail.get("signal"))
        return f"dev server killed{f' ({how})' if how else ''}: Temporal down for every run of the lab"
    if kind == "partition":
        return f"partition: every worker cut off from Temporal{f' for{lasting}' if lasting else ''}"
    return None


def marker_text(ev: FleetEvent) -> str:
    """`── graceful restart of worker 4121 on fleet-activities · SIGTERM, 10 s grace ──`"""
    return f"── {words(ev.event, ev.detail, ev.pid_label) or ev.event} ──"


def place_mark(ev: FleetEvent, events: Sequence[HistoryEvent]) -> int | None:
    """The index of the first history event after the fleet event, or None until one has arrived."""
    i = bisect.bisect_right(events, ev.at, key=lambda e: e.time)
    return i if i < len(events) else None


def _name(value: object) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    text = " ".join(value.split())
    return text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
