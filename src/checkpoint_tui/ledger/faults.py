"""The fault plan: rows in `faults`, consumed durably so each fires exactly as often as planned,
even when the worker that consumed one was killed right after."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.effects import KINDS
from checkpoint_tui.ledger.plans import Plan, run, runs, stmt
from checkpoint_tui.ledger.store import LOG_ACTIVITY, now, touch_parts, touch_step

FAULT_KINDS = (
    "transient",
    "garble",
    "crash_in_tool",
    "crash_before_claim",
    "crash_after_claim",
    "crash_after_write",
    "crash_after_stamp",
    "kill_at",
    "freeze",
    "stop_after_claim",
)
EFFECT_FAULTS = ("crash_after_claim", "crash_after_write", "stop_after_claim")  # these name an effect kind
MAX_STEP = 100_000  # no run is longer (engine.shared.MAX_STEPS); a larger number is a typo, not a plan
MAX_COUNT = 100


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    step: int
    count: int = 1
    effect_kind: str | None = None

    def describe(self) -> str:
        extra = f":{self.effect_kind}" if self.effect_kind else ""
        times = f"x{self.count}" if self.kind == "transient" else ""
        return f"{self.kind}@{self.step}{extra}{times}"


def parse_fault(text: str) -> FaultSpec:
    """`transient:STEP[:COUNT]`, `garble:STEP`, `crash_in_tool:STEP` (the first tool call from STEP
    on), `crash_before_claim:STEP`, `crash_after_claim:STEP[:KIND]`,
    `crash_after_write:STEP[:KIND]`, `crash_after_stamp:STEP`, `kill_at:STEP`, `freeze:STEP`,
    `stop_after_claim:STEP[:KIND]`."""
    shown = repr(text[:60]) + ("..." if len(text) > 60 else "")  # a flag's text, echoed bounded
    parts = text.split(":")
    kind = parts[0].replace("-", "_")
    if kind not in FAULT_KINDS or len(parts) < 2:
        raise ValueError(f"bad fault {shown}: use one of {', '.join(k + ':STEP' for k in FAULT_KINDS)}")
    most = 3 if kind == "transient" or kind in EFFECT_FAULTS else 2
    if len(parts) > most:
        form = "STEP[:COUNT]" if kind == "transient" else "STEP[:KIND]" if kind in EFFECT_FAULTS else "STEP only"
        raise ValueError(f"bad fault {shown}: {kind} takes {form}")
    step = _whole(parts[1])
    if step is None:
        raise ValueError(f"bad fault {shown}: STEP must be a whole number")
    if not 1 <= step <= MAX_STEP:
        raise ValueError(f"bad fault {shown}: STEP must be between 1 and {MAX_STEP}")
    if kind == "transient":
        count = _whole(parts[2]) if len(parts) > 2 else 1
        if count is None:
            raise ValueError(f"bad fault {shown}: COUNT must be a whole number")
        if not 1 <= count <= MAX_COUNT:
            raise ValueError(f"bad fault {shown}: COUNT must be between 1 and {MAX_COUNT}")
        return FaultSpec(kind, step, count=count)
    if kind in EFFECT_FAULTS:
        effect_kind = parts[2] if len(parts) > 2 else "file"
        if effect_kind not in KINDS:
            raise ValueError(f"bad fault {shown}: effect kind must be one of {KINDS}")
        return FaultSpec(kind, step, effect_kind=effect_kind)
    return FaultSpec(kind, step)


def _whole(text: str) -> int | None:
    """ASCII digits only: int() would also take ' 3', '+3', '1_0' and other scripts' digits. A longer
    run of digits than any bound here reads as 10**12, out of every range (and never parsed whole)."""
    if not (text.isascii() and text.isdigit()):
        return None
    return int(text) if len(text) <= 12 else 10**12


def add_fault(conn: Ledger, run_id: str, fault: FaultSpec) -> None:
    conn.execute(
        "INSERT INTO faults(run_id, step, kind, effect_kind, count, fired, created_at) VALUES(?,?,?,?,?,0,?)",
        (run_id, fault.step, fault.kind, fault.effect_kind, fault.count, now()),
    )


def consume_plan(run_id: str, step: int, kind: str, effect_kind: str | None = None) -> Plan[bool]:
    fired = yield stmt(
        "UPDATE faults SET fired = fired + 1 WHERE fired < count AND id = ("
        "SELECT id FROM faults WHERE run_id = ? AND step = ? AND kind = ? AND fired < count "
        "AND (CAST(? AS TEXT) IS NULL OR effect_kind = ?) ORDER BY id LIMIT 1)",
        (run_id, step, kind, effect_kind, effect_kind),
    )
    return fired.rowcount == 1


@runs(consume_plan)
def consume(conn: Ledger, run_id: str, step: int, kind: str, effect_kind: str | None = None) -> bool:
    """Fire a planned fault once: True if this call used one of its remaining firings. One statement,
    so it is atomic on both backends (PostgreSQL re-checks `fired < count` after a concurrent update)."""
    return run(conn, consume_plan(run_id, step, kind, effect_kind))


def consume_from_plan(run_id: str, step: int, kind: str) -> Plan[bool]:
    left = yield stmt(
        "SELECT 1 FROM faults WHERE run_id = ? AND step <= ? AND kind = ? AND fired < count", (run_id, step, kind)
    )
    if not left.fetchone():
        return False
    fired = yield stmt(
        "UPDATE faults SET fired = fired + 1 WHERE fired < count AND id = ("
        "SELECT id FROM faults WHERE run_id = ? AND step <= ? AND kind = ? AND fired < count ORDER BY id LIMIT 1)",
        (run_id, step, kind),
    )
    return fired.rowcount == 1


@runs(consume_from_plan)
def consume_from(conn: Ledger, run_id: str, step: int, kind: str) -> bool:
    """`consume` for a fault planned at this step or any step before it (not fired yet): a fault that
    waits for the first step with a tool call, say. A read first, so a step with none writes nothing."""
    return run(conn, consume_from_plan(run_id, step, kind))


Planned = set[tuple[str, str | None]]
# What an activity's fault hooks look at: the faults with firings left at this step, and a
# crash_in_tool planned earlier that no tool call has reached yet (it waits for the next one).
_PLANNED = (
    "SELECT kind, effect_kind FROM faults WHERE run_id = ? AND fired < count "
    "AND (step = ? OR (kind = 'crash_in_tool' AND step < ?))"
)


def touch_step_planned_plan(
    run_id: str, step: int, activity: str, attempt: int, pid: int, status: str, **fields: Any
) -> Plan[Planned]:
    """PostgreSQL: the touch's two writes and the read of the fault plan in one statement (the writes
    in WITH run to completion whether or not the SELECT reads them)."""
    log, (upsert, params) = touch_parts(run_id, step, activity, attempt, pid, status, **fields)
    rows = yield stmt(
        f"WITH logged AS ({LOG_ACTIVITY}), touched AS ({upsert}) {_PLANNED}", (*log, *params, run_id, step, step)
    )
    return {(r["kind"], r["effect_kind"]) for r in rows}


@runs(touch_step_planned_plan)
def touch_step_planned(
    conn: Ledger, run_id: str, step: int, activity: str, attempt: int, pid: int, status: str, **fields: Any
) -> Planned:
    """`store.touch_step`, then the (kind, effect kind) of the faults planned here: an activity with
    fault hooks reads them in the same round trip as its touch (one statement on PostgreSQL)."""
    if conn.writes_in_with:
        return run(conn, touch_step_planned_plan(run_id, step, activity, attempt, pid, status, **fields))
    touch_step(conn, run_id, step, activity, attempt, pid, status, **fields)
    return {(r["kind"], r["effect_kind"]) for r in conn.execute(_PLANNED, (run_id, step, step))}


def pending(conn: Ledger, run_ids: Sequence[str]) -> list[FaultSpec]:
    """Faults planned for these runs that have firings left, in the order they were planned."""
    marks = ",".join("?" for _ in run_ids) or "NULL"
    rows = conn.execute(
        f"SELECT kind, step, effect_kind, count FROM faults WHERE run_id IN ({marks}) AND fired < count ORDER BY id",
        tuple(run_ids),
    )
    return [FaultSpec(r["kind"], r["step"], r["count"], r["effect_kind"]) for r in rows]


def delete_for_run(conn: Ledger, run_id: str) -> None:
    conn.execute("DELETE FROM faults WHERE run_id = ?", (run_id,))


def armed_kill_steps(conn: Ledger) -> tuple[list[tuple[str, int]], bool]:
    """(run_id, step) of kill_at faults not yet fired, for the supervisor to watch, and whether any run
    is running at all (one statement: the supervisor asks on every housekeeping tick)."""
    rows = conn.execute(
        "SELECT r.run_id, f.step FROM runs r LEFT JOIN faults f ON f.run_id = r.run_id "
        "AND f.kind = 'kill_at' AND f.fired < f.count WHERE r.status = 'running'"
    ).fetchall()
    return [(r["run_id"], r["step"]) for r in rows if r["step"] is not None], bool(rows)
