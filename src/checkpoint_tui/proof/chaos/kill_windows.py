"""Where each worker death of a chaos run landed: the run's history (every execution of its chain)
and its claim attempts, read back after the run, classified by core/windows.py. The report's `windows`
counts them; `chaos --until-covered` aims at the ones not hit yet."""

from __future__ import annotations

from temporalio.client import Client

from checkpoint_tui.core.activity_history import read_chain, timeline
from checkpoint_tui.core.history import to_history_event
from checkpoint_tui.core.view import HistoryEvent
from checkpoint_tui.core.windows import counts, windows_of
from checkpoint_tui.ledger import inspect_queries, queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.chaos import ChaosReport, Placement, read_chaos
from checkpoint_tui.proof.report.codec import JsonObject


async def history_events(client: Client, conn: Ledger, run_id: str) -> list[HistoryEvent]:
    """The run's history as it happened (a reset's replaced execution included: activity_history.timeline)."""
    row = queries.run(conn, run_id)
    chain = await read_chain(client, run_id, row.first_execution if row else None)
    return [to_history_event(ev, segment) for segment, (_, events) in enumerate(timeline(chain)) for ev in events]


async def kill_windows(
    client: Client,
    conn: Ledger,
    run_id: str,
    named: dict[str, str] | None = None,
    deaths: list | None = None,
    probe: list | None = None,
) -> list[Placement]:
    """Each worker death of the run (kill and died events, the ones the kill markers show; or `deaths`,
    the KillEvents to place) with the window it landed in, oldest first. `named`: {activity type:
    window} from the workload's own classification (a framework's model and tool activities), over
    `activity <type>`; `probe`: a user's workload's probe log records (core/windows.classify)."""
    kills = inspect_queries.kill_events(conn, run_id) if deaths is None else deaths
    if not kills:
        return []
    return place(conn, run_id, kills, await history_events(client, conn, run_id), named, probe)


def place(
    conn: Ledger,
    run_id: str,
    kills: list,
    events: list[HistoryEvent],
    named: dict[str, str] | None = None,
    probe: list | None = None,
) -> list[Placement]:
    """The deaths `kills` (KillEvents) placed against the run's history `events` (history_events)."""
    attempts = queries.claim_attempts(conn, run_id)
    return [
        Placement(run_id, k.event, k.pid, k.at, k.activity_step or k.step, _named(window, named or {}))
        for k, window in windows_of(kills, events, attempts, probe)
    ]


def _named(window: str, named: dict[str, str]) -> str:
    """`activity <type>` as the workload's classification names the type (a model call, a tool call)."""
    return named.get(window.removeprefix("activity "), window) if window.startswith("activity ") else window


def window_counts(placed: list[Placement]) -> dict[str, int]:
    """How many placements landed in each window."""
    return counts([p.window for p in placed])


def window_cases(report: ChaosReport | JsonObject) -> list[Check]:
    """One JUnit case per window a worker death landed in (a count, not a verdict: always ok). With
    several runs a death is placed in each, and the count is of placements. `report`: the report, or
    its JSON (read through the schema)."""
    doc = read_chaos(report) if isinstance(report, dict) else report
    if not isinstance(doc, ChaosReport):  # --every-window: its rounds' reports count their own
        return []
    what = "placement(s) of a worker death in a run" if doc.runs is not None else "worker death(s)"
    return [Check(f"window: {w}", True, f"{n} {what} landed here", {"kills": n}) for w, n in doc.windows.items()]
