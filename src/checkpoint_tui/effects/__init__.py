"""Exactly-once side effects for any Temporal Python activity, on the lab's ledger.

    from checkpoint_tui.effects import exactly_once, exactly_once_sync

    @activity.defn
    async def send_email(inp: EmailInput) -> str:
        return await exactly_once(kind="email", payload=inp.text, write=send)  # applied|skipped|recovered

`write(payload)` is your side effect; it may be sync (run on a thread of the library's own) or async
(awaited). The call follows the lab's own protocol (`ledger/effects.py`): a claim row is inserted
first (INSERT ... ON CONFLICT DO NOTHING), then `write` runs, then the claim is stamped.
- applied:   this call inserted the claim, wrote, stamped.
- skipped:   the claim was already stamped: `write` is not called.
- recovered: the claim exists without a stamp: `write` is called again, then stamped.
A claim is not a lease. An unstamped claim means "an earlier attempt died between claim and stamp,
or its write raised", or "another caller is writing right now": the row cannot tell them apart, so
both are `recovered` and the write runs again. That is the protocol's contract, the same as for the
lab's own effects: `write` must be idempotent when redone (the earlier attempt may have finished its
effect before dying, or may still be running: a worker Temporal gave up on, e.g. partitioned).
Check-and-act under a lock, or give the key to your provider as its idempotency key
(`default_key(kind)`). The claim dedupes attempts that come one after another, not live ones that
overlap, with one guard: in one process, calls on the same key take turns (a caller waits until the
call before it on that key has stamped or failed, then is `skipped` or `recovered`), so two
activities of one worker using one business key at once write once. A call on a key from inside the
call that holds it would wait for itself, or write twice: it is refused with `EffectRefused` (from
the write itself or what inherits its context, from a thread the write joins or whose pool job it
waits for, and from any thread of a process forked inside the write). A process forked from another
thread while a call writes waits for that call to end (or its process to die), then claims. A wait
for a turn that lasts 10 minutes (`once.TURN_WAIT_S`) raises TimeoutError (retryable): the call
ahead is hung, or waits for this one in a way the library cannot see. Calls in unrelated processes
(two workers) are not serialised: the second to claim while the first writes is `recovered` and
writes too. If `write` raises, nothing is stamped and the exception propagates (Temporal retries the
activity; the retry is `recovered`). Every attempt is a row in `effect_outcomes` (no outcome:
interrupted). Once `write` returned, the stamp is made even if the activity is cancelled meanwhile
(the cancellation is raised after it). Refusals that can never succeed (a bad kind or key, a write
that is not callable, a payload over 64 KiB or holding NUL, an `async def` write given to
`exactly_once_sync`, a generator function as write: its body would never run) raise
`EffectRefused`, a non-retryable ApplicationError, before anything is claimed. A plain callable that
returns a coroutine (to `exactly_once_sync`) or a generator is known only once called: what it
returned is closed unrun and the call refused; nothing was written, so its attempt's outcome is
`refused` and its probe record is retracted, while its claim stays unstamped as after a write that
raised (the next call is `recovered`, the one write the probe log counts).

Keys. Stored keys are namespaced by where they come from, so they never meet each other nor the
lab's own effect ids (`<workflow id>:<step>:<kind>`) in one ledger. By default the key is the
durable identity of the activity plus the kind: `act:<workflow id>:<run id>:<activity id>:<kind>`
(as `act:sha256:<hex>:<kind>` when an id holds ':' or is not printable, or the identity is over 512
characters); `key="invoice-42"` replaces it with a business key, stored as `key:invoice-42`.
`default_key(kind)` returns the stored form. What that means:
- Retries of the activity (attempt 2, 3, ...) keep workflow id, run id and activity id: the same key.
  A retry after the effect was stamped (the activity failed later) is `skipped`; one after a claim
  without a stamp is `recovered`.
- A killed worker (SIGKILL mid-write, or between claim and stamp) leaves the claim without a stamp;
  Temporal retries the activity on another worker (after its heartbeat or start-to-close timeout)
  with the same ids: `recovered`. Killed after the stamp but before the activity completed: `skipped`.
- A new run of the workflow has a new run id, and its activity ids restart at 1: its default keys
  are new, so its activities apply their effects again. Runs start anew on continue-as-new (as they
  should: its activity 1 is another activity than the previous run's activity 1), on workflow reset
  (the activities re-executed after the reset point apply again: that is what a reset means for the
  history), on a workflow retry (a workflow with a retry policy that failed: the new run redoes
  every activity) and on each cron run. Never key on the activity id alone. If a new run must not
  resend, use a business key: it is the same in every run, and the new run's call is `skipped`.
- Two calls with the same kind in one activity attempt share the default key: the second is
  `skipped`. Use different kinds or business keys for several effects of one activity.
- A business key is global to the ledger: a second workflow using it later is `skipped` (at the same
  time: see "not a lease" above); the row's run_id is the workflow that claimed it first. The stored
  payload is the first claimer's; a recovering call writes the payload it was given, so build
  payloads only from the activity's input.
Heartbeats carry no details: if your activity keeps progress in heartbeat details, heartbeat them
again after the call. Outside an activity the call works with a business key (no heartbeats).

Where. The ledger is `CHECKPOINT_LEDGER_URL` (PostgreSQL) else `CHECKPOINT_HOME/run/checkpoint.db`
(SQLite, the lab home's own ledger); neither set, or a home that cannot be resolved or made (a
symlink loop, a file, a path too long), is an `EffectsConfigError` of one line. Rows go in the lab's
`effects` / `effect_outcomes` tables: id = the stored key, run_id = the workflow id (empty outside an
activity), step = the activity id if it is a number (else 0), kind, payload, attempt = the activity
attempt, worker_pid = this pid. The library keeps one connection per process, used from one thread
of its own; a forked child starts its own (fork-safe).

The probe log (`CHECKPOINT_PROBE_LOG`, else `CHECKPOINT_HOME/run/effects-probe.jsonl`) gets one JSON
line per physical `write` call, fsynced before the call: `read_probe_log(path)` gives the count per
stored key, independently of the ledger's claim rows (>1 means the write was entered more than once).
"""

from checkpoint_tui.effects.identity import KEY_LIMIT, PAYLOAD_LIMIT, EffectRefused
from checkpoint_tui.effects.location import EffectsConfigError, ledger_target, probe_log_path
from checkpoint_tui.effects.once import Outcome, close, default_key, exactly_once, exactly_once_sync
from checkpoint_tui.effects.probe import ProbeLogError, ProbeRecord, read_probe_log, read_probe_records

__all__ = [
    "KEY_LIMIT",
    "PAYLOAD_LIMIT",
    "EffectRefused",
    "EffectsConfigError",
    "Outcome",
    "ProbeLogError",
    "ProbeRecord",
    "close",
    "default_key",
    "exactly_once",
    "exactly_once_sync",
    "ledger_target",
    "probe_log_path",
    "read_probe_log",
    "read_probe_records",
]
