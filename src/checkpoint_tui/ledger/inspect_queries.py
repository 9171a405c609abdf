"""The app's instrument reads: the completion sentence's worker count, kill markers for the history
pane, and one step in full for the step inspector. Each is made once per event (a run's end, a kill,
a keypress), never per refresh; all return plain dataclasses."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import ClaimAttempt, EffectRow, StepRow, detail_of, worker_label
from checkpoint_tui.settings import HOST

TRUNCATED = "truncated"  # how the model layer marks an answer it had to cut (steps.answer_note)


@dataclass(frozen=True)
class KillEvent:
    """A kill or death of a worker during a run, with the activity attempt the dead worker had last
    started before it (its newest activity_log row at or before the death)."""

    id: int
    at: float
    event: str  # kill | died
    pid: int | None
    host: str | None
    identity: str | None
    step: int | None
    signal: str | None
    activity: str | None = None
    attempt: int | None = None
    activity_step: int | None = None

    @property
    def pid_label(self) -> str:
        return worker_label(self.pid, self.host)

    @property
    def short_identity(self) -> str:
        """The worker's name without `@host` when it is this host (the pid already says where)."""
        ident = self.identity or ""
        return ident.split("@", 1)[0] if ident.endswith(f"@{HOST}") else ident


@dataclass(frozen=True)
class ActivityAttempt:
    activity: str
    attempt: int
    worker_pid: int
    host: str | None
    started_at: float

    @property
    def worker(self) -> str:
        return worker_label(self.worker_pid, self.host)


@dataclass(frozen=True)
class StepDetail:
    run_id: str
    step: StepRow
    answer_note: str | None
    effects: list[EffectRow]
    claims: list[ClaimAttempt]
    attempts: list[ActivityAttempt]

    @property
    def truncated(self) -> bool:
        return TRUNCATED in (self.answer_note or "")


def finisher_count(conn: Ledger, run_id: str) -> int:
    """Distinct worker processes (host, pid) that completed a step of the run."""
    row = conn.execute(
        "SELECT COUNT(*) FROM (SELECT DISTINCT worker_host, worker_pid FROM steps "
        "WHERE run_id = ? AND status = 'completed' AND worker_pid IS NOT NULL) AS f",
        (run_id,),
    ).fetchone()
    return int(row[0])


def steps_with_notes(conn: Ledger, run_id: str, since: float | None = None) -> tuple[list[StepRow], list[int]]:
    """The run's step rows (with `since`, only those written since) and which of them hold a truncated
    answer: the same one statement as the plain step read."""
    if since is None:
        rows = conn.execute("SELECT * FROM steps WHERE run_id = ? ORDER BY step", (run_id,)).fetchall()
    else:
        rows = conn.execute(
            "SELECT * FROM steps WHERE run_id = ? AND touched_at >= ? ORDER BY step", (run_id, since)
        ).fetchall()
    truncated = [r["step"] for r in rows if TRUNCATED in (r["answer_note"] or "")]
    return [StepRow.of(r) for r in rows], truncated


def kill_events(
    conn: Ledger, run_id: str, ids: list[int] | None = None, of_runs: list[str] | None = None, served: bool = False
) -> list[KillEvent]:
    """The run's kill/died worker events (all, or those with the given ids), oldest first, each with
    the dead worker's last activity attempt of the run started at or before its death. `of_runs`:
    the deaths filed under any of these runs instead (runs on the same workers: one death interrupts
    each), still each with its attempt of `run_id`. `served`: also the deaths, filed under other runs,
    of the worker that had started this run's latest attempt before the death, while the run was not
    over (the app, which does not know which runs were started together)."""
    if ids is not None and not ids:
        return []
    filed = of_runs or [run_id]
    sql = f"SELECT * FROM worker_events w WHERE (run_id IN ({','.join('?' for _ in filed)})"
    params: list = list(filed)
    if served:
        sql += _SERVED
        params.append(run_id)
    sql += ") AND event IN ('kill', 'died')"
    if ids is not None:
        sql += f" AND id IN ({','.join('?' for _ in ids)})"
        params += ids
    out = []
    for r in conn.execute(sql + " ORDER BY id", params).fetchall():
        attempt = conn.execute(
            "SELECT activity, attempt, step FROM activity_log WHERE run_id = ? AND worker_pid = ? "
            "AND COALESCE(host, '') = COALESCE(?, '') AND started_at <= ? ORDER BY started_at DESC, id DESC LIMIT 1",
            (run_id, r["pid"], r["host"], r["at"]),
        ).fetchone()
        out.append(
            KillEvent(
                r["id"],
                r["at"],
                r["event"],
                r["pid"],
                r["host"],
                r["identity"],
                r["step"],
                detail_of(r["detail"]).get("signal"),
                attempt["activity"] if attempt else None,
                attempt["attempt"] if attempt else None,
                attempt["step"] if attempt else None,
            )
        )
    return out


# A death of the worker that started the run's latest activity attempt before it, while the run was
# not over: the worker holding the run's step then (not one that ran some earlier step of it).
_SERVED = (
    " OR EXISTS (SELECT 1 FROM activity_log a JOIN runs r ON r.run_id = a.run_id WHERE a.run_id = ? "
    "AND a.worker_pid = w.pid AND COALESCE(a.host, '') = COALESCE(w.host, '') "
    "AND a.started_at = (SELECT MAX(b.started_at) FROM activity_log b WHERE b.run_id = a.run_id "
    "AND b.started_at <= w.at) AND (r.ended_at IS NULL OR w.at <= r.ended_at))"
)


def deaths_after(conn: Ledger, after_id: int) -> list[int]:
    """The ids of kill/died events after `after_id`, of any run (a poller's new deaths)."""
    rows = conn.execute(
        "SELECT id FROM worker_events WHERE id > ? AND event IN ('kill', 'died') ORDER BY id", (after_id,)
    )
    return [r[0] for r in rows]


def last_event_id(conn: Ledger) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM worker_events").fetchone()[0])


def step_detail(conn: Ledger, run_id: str, step: int) -> StepDetail | None:
    """One step in full: its row, its effects with payloads and every claim attempt, every activity
    attempt (which worker, which host)."""
    row = conn.execute("SELECT * FROM steps WHERE run_id = ? AND step = ?", (run_id, step)).fetchone()
    if row is None:
        return None
    claims = [
        ClaimAttempt.of(r)
        for r in conn.execute(
            "SELECT seq, effect_id, step, kind, attempt, worker_pid, host, COALESCE(outcome, 'interrupted') "
            "AS outcome, started_at, finished_at FROM effect_outcomes WHERE run_id = ? AND step = ? ORDER BY seq",
            (run_id, step),
        )
    ]
    effects = [
        EffectRow(
            r["id"],
            r["step"],
            r["kind"],
            r["attempt"],
            r["claimed_at"],
            r["applied_at"],
            ",".join(c.outcome for c in claims if c.effect_id == r["id"]),
            r["payload"],
        )
        for r in conn.execute(
            "SELECT * FROM effects WHERE run_id = ? AND step = ? ORDER BY claimed_at, id", (run_id, step)
        ).fetchall()
    ]
    attempts = [
        ActivityAttempt(r["activity"], r["attempt"], r["worker_pid"], r["host"], r["started_at"])
        for r in conn.execute(
            "SELECT activity, attempt, worker_pid, host, started_at FROM activity_log WHERE run_id = ? AND step = ? "
            "ORDER BY started_at, id",
            (run_id, step),
        )
    ]
    return StepDetail(run_id, StepRow.of(row), row["answer_note"], effects, claims, attempts)


# --- the lab's fleet events, marked in the history pane like kills (core/fleet_marks.py) ---------------

# A graceful stop (SIGTERM) and the stopped worker's exit, and chaos's own record of the fleet nemeses
# that have no such per-worker event (a fleet-down's SIGKILLs are `died` events, marked as kills).
# every run on the lab's queues at once (their detail names the queues: on a shared ledger, not another lab's)
LAB_WIDE_MARKS = ("chaos:temporal-server", "chaos:partition")
FLEET_MARKS = ("sigterm", "exit", "chaos:fleet-down", "chaos:deploy", "chaos:dependency", *LAB_WIDE_MARKS)
FLEET_MARKS_LIMIT = 500  # per read; a poller reads on from the newest it got


@dataclass(frozen=True)
class FleetEvent:
    """A fleet event of the lab during a run: a worker event of FLEET_MARKS with its JSON detail."""

    id: int
    at: float
    event: str
    pid: int | None
    host: str | None
    identity: str | None
    detail: dict

    @property
    def pid_label(self) -> str:
        return worker_label(self.pid, self.host)


def fleet_page(conn: Ledger, run_id: str, after_id: int = 0) -> tuple[list[FleetEvent], int, bool]:
    """One read of the run's fleet events after `after_id`, oldest first: those filed under it, and those
    filed under no run or another one while it was not over (a graceful stop is filed under none, and a
    fleet event stops every run on the fleet, whichever run the lab filed it under); a lab-wide one only
    if its detail names the run's queue. With the newest id the read went through and whether it was a
    full page: a page of only other labs' events still moves a reader on."""
    marks = ",".join("?" for _ in FLEET_MARKS)
    rows = conn.execute(
        f"SELECT w.*, r.task_queue AS run_queue FROM worker_events w JOIN runs r ON r.run_id = ? WHERE w.id > ? "
        f"AND w.event IN ({marks}) "
        "AND (w.run_id = r.run_id OR (w.at >= r.created_at AND (r.ended_at IS NULL OR w.at <= r.ended_at))) "
        "ORDER BY w.id LIMIT ?",
        (run_id, after_id, *FLEET_MARKS, FLEET_MARKS_LIMIT),
    ).fetchall()
    out = []
    for r in rows:
        ev = FleetEvent(r["id"], r["at"], r["event"], r["pid"], r["host"], r["identity"], detail_of(r["detail"]))
        if _reached(ev, r["run_queue"], r["run_id"] == run_id):
            out.append(ev)
    return out, max((r["id"] for r in rows), default=after_id), len(rows) >= FLEET_MARKS_LIMIT


def _reached(ev: FleetEvent, run_queue: str | None, filed_here: bool) -> bool:
    """A lab-wide event reached the runs of the queues its detail names (one filed without them reaches
    no other run: as the audit reads it, core/lost_work.py)."""
    if filed_here or ev.event not in LAB_WIDE_MARKS:
        return True
    queues = ev.detail.get("queues")
    return isinstance(queues, list) and run_queue in queues
