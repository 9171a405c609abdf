"""Exactly-once effects: the claim (INSERT ... ON CONFLICT DO NOTHING) is the lock, the stamp (applied_at) comes last.

Three branches, each recorded in `effect_outcomes` so the UI can count them:
- applied:   we inserted the claim -> physical write -> stamp
- skipped:   the claim exists and is stamped -> nothing to do
- recovered: the claim exists but applied_at IS NULL (a writer died in between) -> redo the
             deterministic write, idempotently, then stamp

The protocol is two atomic writes, `claim_effect` and `stamp_effect`, with the physical write between
them; `apply_effect_once` drives them for the lab's own effects (`apply_effect_once_async` is the same
sequence, `_protocol`, for the worker's activities, which await the ledger) and `checkpoint_tui.effects`
drives the same two for a user's activity (sync or async), so there is one implementation of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from checkpoint_tui.ledger.artifacts import append_once, outbox_line, outbox_path, same_bytes, step_file, write_atomic
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.plans import Plan, drive, drive_async, run, runs, stmt
from checkpoint_tui.ledger.store import now, transaction
from checkpoint_tui.settings import HOST

KINDS = ("file", "db", "email")


@dataclass(frozen=True)
class EffectSpec:
    run_id: str
    step: int
    kind: str
    payload: str
    attempt: int
    worker_pid: int
    workflow_id: str
    key: str | None = None  # the effect id when given (the effects library's keys); else workflowId:step:kind

    @property
    def id(self) -> str:
        return self.key if self.key is not None else effect_id(self.workflow_id, self.step, self.kind)


def effect_id(workflow_id: str, step: int, kind: str) -> str:
    return f"{workflow_id}:{step}:{kind}"


# physical(spec, recovering): recovering=True means "a previous writer may have done this already".
# It returns whether it found the write already done (True), did it (False), or cannot tell (None):
# recorded on the attempt's outcome row, it is what places a kill between the write and the stamp.
Physical = Callable[[EffectSpec, bool], "bool | None"]


@dataclass(frozen=True)
class Claim:
    """One claim attempt: its `effect_outcomes` row and what the attempt must do (the outcome it
    records once stamped): 'applied' (we inserted the claim), 'skipped' or 'recovered'."""

    seq: int
    outcome: str

    @property
    def must_write(self) -> bool:
        return self.outcome != "skipped"


_RECORD_ATTEMPT = (
    "INSERT INTO effect_outcomes(effect_id, run_id, step, kind, attempt, worker_pid, host, started_at) "
    "VALUES(?,?,?,?,?,?,?,?) RETURNING seq"
)
_CLAIM = (
    "INSERT INTO effects(id, run_id, step, kind, payload, attempt, claimed_at, applied_at) "
    "VALUES(?,?,?,?,?,?,?,NULL) ON CONFLICT(id) DO NOTHING"
)
_STAMP = (
    "UPDATE effects SET applied_at = ?, attempt = CASE WHEN attempt > ? THEN attempt ELSE ? END "
    "WHERE id = ? AND applied_at IS NULL"
)
_FINISH_ATTEMPT = "UPDATE effect_outcomes SET outcome = ?, finished_at = ?, found_written = ? WHERE seq = ?"


def _claim_rows(spec: EffectSpec) -> tuple[tuple, tuple]:
    attempt = (spec.id, spec.run_id, spec.step, spec.kind, spec.attempt, spec.worker_pid, HOST, now())
    claim = (spec.id, spec.run_id, spec.step, spec.kind, spec.payload, spec.attempt, now())
    return attempt, claim


def claim_plan(spec: EffectSpec) -> Plan[Claim]:
    """claim_effect as one statement (PostgreSQL: one round trip, atomic on its own). Its reads see the
    effects table as the statement began, not what another attempt committed while this one waited on
    the conflict (its claim, or its stamp of a claim already there): an unstamped or missing claim is
    read again after the wait, so a stamped one is 'skipped', never 'recovered' and written twice."""
    attempt, claim = _claim_rows(spec)
    row = (
        yield stmt(
            f"WITH attempt AS ({_RECORD_ATTEMPT}), claimed AS ({_CLAIM} RETURNING id) "
            "SELECT (SELECT seq FROM attempt) AS seq, (SELECT COUNT(*) FROM claimed) AS claimed, "
            "(SELECT applied_at FROM effects WHERE id = ?) AS applied_at",
            (*attempt, *claim, spec.id),
        )
    ).fetchone()
    seq = int(row["seq"])
    if row["claimed"] == 1:
        return Claim(seq, "applied")
    if row["applied_at"] is None:  # a recovery (rare) costs this one more round trip
        row = (yield stmt("SELECT applied_at FROM effects WHERE id = ?", (spec.id,))).fetchone()
    return Claim(seq, "skipped" if row["applied_at"] is not None else "recovered")


@runs(claim_plan)
def claim_effect(conn: Ledger, spec: EffectSpec) -> Claim:
    """The first atomic write: record the attempt and try to insert the claim."""
    if conn.writes_in_with:
        return run(conn, claim_plan(spec))
    attempt, claim = _claim_rows(spec)
    with transaction(conn):  # the insert is the lock: ON CONFLICT decides, no other lock needed
        seq = int(conn.execute(_RECORD_ATTEMPT, attempt).fetchone()[0])
        if conn.execute(_CLAIM, claim).rowcount == 1:
            return Claim(seq, "applied")
        existing = conn.execute("SELECT applied_at FROM effects WHERE id = ?", (spec.id,)).fetchone()
    return Claim(seq, "skipped" if existing["applied_at"] is not None else "recovered")


def _stamp_rows(spec: EffectSpec, claim: Claim, found_written: bool | None) -> tuple[tuple, tuple]:
    found = None if found_written is None or not claim.must_write else int(found_written)
    return (now(), spec.attempt, spec.attempt, spec.id), (claim.outcome, now(), found, claim.seq)


def stamp_plan(spec: EffectSpec, claim: Claim, found_written: bool | None = None) -> Plan[None]:
    """stamp_effect where writes may sit in WITH (PostgreSQL): one statement either way."""
    stamp, finish = _stamp_rows(spec, claim, found_written)
    if not claim.must_write:
        yield stmt(_FINISH_ATTEMPT, finish)  # nothing to stamp
    else:  # the stamp and the outcome in one statement: a crash leaves neither
        yield stmt(f"WITH stamped AS ({_STAMP}) {_FINISH_ATTEMPT}", (*stamp, *finish))


@runs(stamp_plan)
def stamp_effect(conn: Ledger, spec: EffectSpec, claim: Claim, found_written: bool | None = None) -> None:
    """The second atomic write, after the physical write returned (not called if it raised: the claim
    stays unstamped and the attempt without an outcome, i.e. interrupted). `found_written`: what the
    write reported (None: it cannot tell, or there was nothing to write)."""
    if conn.writes_in_with or not claim.must_write:
        run(conn, stamp_plan(spec, claim, found_written))
        return
    stamp, finish = _stamp_rows(spec, claim, found_written)
    with transaction(conn):  # the stamp and the outcome together: a crash leaves neither
        conn.execute(_STAMP, stamp)
        conn.execute(_FINISH_ATTEMPT, finish)


def refuse_plan(claim: Claim) -> Plan[None]:
    yield stmt(_FINISH_ATTEMPT, ("refused", now(), 0, claim.seq))


@runs(refuse_plan)
def refuse_attempt(conn: Ledger, claim: Claim) -> None:
    """The claim attempt's outcome when its write returned instead of running (closed unrun): 'refused',
    not interrupted. Its claim stays as it was (unstamped): another attempt may be writing under it."""
    run(conn, refuse_plan(claim))


def apply_effect_once(
    conn: Ledger,
    spec: EffectSpec,
    physical: Physical,
    after_claim: Callable[[], None] | None = None,
    after_write: Callable[[], None] | None = None,
) -> str:
    """Apply one effect at most once per id; returns 'applied', 'skipped' or 'recovered'. The hooks
    are the fault plan's: `after_claim` between the claim and the write, `after_write` between the
    write and the stamp (each only on the attempt that took the claim)."""
    claim, stamp = partial(claim_effect, conn), partial(stamp_effect, conn)
    return drive(_protocol(spec, claim, physical, stamp, after_claim, after_write), _as_is)


async def apply_effect_once_async(
    claim: Callable[[EffectSpec], Awaitable[Claim]],
    stamp: Callable[[EffectSpec, Claim, bool | None], Awaitable[None]],
    spec: EffectSpec,
    physical: Callable[[EffectSpec, bool], Any],
    after_claim: Callable[[], None] | None = None,
    after_write: Callable[[], None] | None = None,
) -> str:
    """apply_effect_once with the claim, the stamp and (if it likes) the physical write awaited: the
    same steps in the same order (`_protocol`), for an activity whose ledger is a round trip away."""
    return await drive_async(_protocol(spec, claim, physical, stamp, after_claim, after_write), _as_is)


def _protocol(
    spec: EffectSpec,
    claim: Callable[[EffectSpec], Any],
    physical: Callable[[EffectSpec, bool], Any],
    stamp: Callable[[EffectSpec, Claim, bool | None], Any],
    after_claim: Callable[[], None] | None,
    after_write: Callable[[], None] | None,
) -> Plan[str]:
    """claim -> write -> stamp, once: each step is yielded as its result (the blocking driver) or as an
    awaitable of it (the asyncio driver), so both run this one sequence."""
    taken: Claim = yield claim(spec)
    if taken.outcome == "applied" and after_claim is not None:
        after_claim()  # fault hook: the claim -> write window
    found = (yield physical(spec, taken.outcome == "recovered")) if taken.must_write else None
    if taken.outcome == "applied" and after_write is not None:
        after_write()  # fault hook: the write -> stamp window
    yield stamp(spec, taken, found)
    return taken.outcome


def _as_is(value: Any) -> Any:
    return value


# --- the three physical effects ------------------------------------------------------------------


def write_step_file(artifacts_dir: Path, spec: EffectSpec, recovering: bool, durable: bool = True) -> bool | None:
    """Atomic replace: a retried write produces the same bytes, so redoing it is harmless (and done
    anyway). Recovering, it first looks whether the file already holds them: True if so."""
    path = step_file(artifacts_dir, spec.run_id, spec.step)
    data = spec.payload.encode("utf-8")
    found = same_bytes(path, data) if recovering else None
    write_atomic(path, data, durable)
    return found


def add_note_plan(spec: EffectSpec) -> Plan[bool]:
    """The note of a durable run, added unless its effect id has one (the unique index decides, in one
    statement on both engines); True if it was there already (no row back)."""
    added = yield stmt(_ADD_NOTE + " RETURNING effect_id", (spec.id, spec.run_id, spec.step, spec.payload))
    return added.fetchone() is None


@runs(add_note_plan)
def add_note(conn: Ledger, spec: EffectSpec) -> bool:
    return run(conn, add_note_plan(spec))


def insert_note(conn: Ledger, spec: EffectSpec, check: bool) -> bool | None:
    """With `check`, the note is added only if this effect id has none: the unique index on a durable
    run's effect ids decides in one statement (`add_note`); a run that index leaves out (the naive
    loop's) looks and inserts under the write lock."""
    return note_through(partial(_on, conn), spec, check)


def note_through(call: LedgerCall, spec: EffectSpec, check: bool) -> Any:
    """insert_note with its ledger work done by `call(fn, *args)`: `fn(conn, *args)` here, or awaited
    elsewhere (loop_worker/activity_ledger.py)."""
    if check and not spec.run_id.lower().startswith(NAIVE_PREFIX):  # lower(): SQLite's LIKE ignores case
        return call(add_note, spec)
    return call(_note_under_lock, spec, check)


def _note_under_lock(conn: Ledger, spec: EffectSpec, check: bool) -> bool | None:
    with transaction(conn, spec.id):
        if (
            check
            and conn.execute(
                "SELECT 1 FROM notes WHERE run_id = ? AND effect_id = ?", (spec.run_id, spec.id)
            ).fetchone()
        ):
            return True
        conn.execute(_ADD_NOTE, (spec.id, spec.run_id, spec.step, spec.payload))
    return False if check else None


# call(fn, *args): run the ledger function fn(conn, *args) on some connection, now or as an awaitable
LedgerCall = Callable[..., Any]


def _on(conn: Ledger, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(conn, *args)


_ADD_NOTE = "INSERT INTO notes(effect_id, run_id, step, text) VALUES(?,?,?,?) ON CONFLICT DO NOTHING"
NAIVE_PREFIX = "naive-"  # schema.notes_effect_once: runs whose ids start so may repeat a note


def append_outbox(artifacts_dir: Path, spec: EffectSpec, check: bool, durable: bool = True) -> bool | None:
    """The 'email': one line naming its effect id, so a second send is visible in the file. With `check`,
    look and append under an exclusive lock."""
    prefix = outbox_line(spec.id, "").rstrip("\n").encode()
    appended = append_once(
        outbox_path(artifacts_dir, spec.run_id), prefix, outbox_line(spec.id, spec.payload).encode(), check, durable
    )
    return (not appended) if check else None


def physical_for(
    kind: str,
    conn: Ledger | None,
    artifacts_dir: Path,
    guarded: bool = True,
    durable: bool = True,
    call: LedgerCall | None = None,
) -> Physical:
    """The write for one kind. Guarded (the durable path), the note and the email check for their own
    earlier copy on every write, not only when recovering: a writer Temporal gave up on may still be
    alive (a partitioned host) while its retry recovers, and only one of them may add the row or line.
    Unguarded is the naive loop's plain send. `durable` fsyncs a file write before the stamp. The note
    goes through `call` when given (its result may then be an awaitable), else through `conn`."""
    if kind == "file":
        return lambda spec, recovering: write_step_file(artifacts_dir, spec, recovering, durable)
    if kind == "db":
        if call is None and conn is None:
            raise ValueError("a db write needs a ledger: `call` or `conn`")
        through = call or partial(_on, conn)  # type: ignore[arg-type]  # not None: checked above
        return lambda spec, recovering: note_through(through, spec, guarded or recovering)
    if kind == "email":
        return lambda spec, recovering: append_outbox(artifacts_dir, spec, guarded or recovering, durable)
    raise ValueError(f"unknown effect kind {kind!r}; expected one of {KINDS}")
