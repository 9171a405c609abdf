"""Exactly-once side effects for any Temporal Python activity, on the lab's ledger.

    from checkpoint_tui.effects import exactly_once, exactly_once_sync

    @activity.defn
    async def send_email(inp: EmailInput) -> str:
        return await exactly_once(kind="email", payload=inp.text, write=send)  # applied|skipped|recovered

`write(payload)` is your side effect; it may be sync (run in a thread) or async (awaited). The call
follows the lab's own protocol (`ledger/effects.py`): a claim row is inserted first (INSERT ... ON
CONFLICT DO NOTHING: the insert is the lock), then `write` runs, then the claim is stamped.
- applied:   this call inserted the claim, wrote, stamped.
- skipped:   the claim was already stamped: `write` is not called.
- recovered: the claim exists without a stamp (an earlier attempt died between claim and stamp, or
             its write raised): `write` is called again, then stamped. So `write` must be idempotent
             when redone: the earlier attempt may have finished its effect before dying, or may even
             still be running (a worker Temporal gave up on, e.g. partitioned). Check-and-act under a
             lock, or give the key to your provider as its idempotency key (`default_key(kind)`).
If `write` raises, nothing is stamped and the exception propagates (Temporal retries the activity;
the retry is `recovered`). Every attempt is a row in `effect_outcomes` (no outcome: interrupted).
Refusals that can never succeed (a bad kind or key, a payload over 64 KiB or holding NUL) raise
`EffectRefused`, a non-retryable ApplicationError, before anything is claimed.

Keys. By default the key is the durable identity of the activity plus the kind:
`<workflow id>:<workflow run id>:<activity id>:<kind>` (as `sha256:<hex>:<kind>` if that is over 512
characters or not printable); `key="invoice-42"` replaces it with a business key. What that means:
- Retries of the activity (attempt 2, 3, ...) keep workflow id, run id and activity id: the same key.
  A retry after the effect was stamped (the activity failed later) is `skipped`; one after a claim
  without a stamp is `recovered`.
- A killed worker (SIGKILL mid-write, or between claim and stamp) leaves the claim without a stamp;
  Temporal retries the activity on another worker (after its heartbeat or start-to-close timeout)
  with the same ids: `recovered`. Killed after the stamp but before the activity completed: `skipped`.
- Continue-as-new starts a new run (new run id) whose activity ids restart at 1: its keys are new,
  as they should be (its activity 1 is another activity than the previous run's activity 1). Never
  key on the activity id alone. A business key is the same in every run.
- Workflow reset also starts a new run id, so with default keys the activities re-executed after
  the reset point apply their effects again (that is what a reset means for the history). If a
  reset must not resend, use a business key: the new run's call finds it stamped and is `skipped`.
- Two calls with the same kind in one activity attempt share the default key: the second is
  `skipped`. Use different kinds or business keys for several effects of one activity.
- A business key is global to the ledger: a second workflow using it is `skipped`; the row's run_id
  is the workflow that claimed it first. The stored payload is the first claimer's; a recovering
  call writes the payload it was given, so build payloads only from the activity's input.
Heartbeats carry no details: if your activity keeps progress in heartbeat details, heartbeat them
again after the call. Outside an activity the call works with a business key (no heartbeats).

Where. The ledger is `CHECKPOINT_LEDGER_URL` (PostgreSQL) else `CHECKPOINT_HOME/run/checkpoint.db`
(SQLite, the lab home's own ledger); neither set is an `EffectsConfigError`. Rows go in the lab's
`effects` / `effect_outcomes` tables: id = the key, run_id = the workflow id, step = the activity id
if it is a number (else 0), kind, payload, attempt = the activity attempt, worker_pid = this pid.
The library keeps one connection per process, used from one thread of its own.

The probe log (`CHECKPOINT_PROBE_LOG`, else `CHECKPOINT_HOME/run/effects-probe.jsonl`) gets one JSON
line per physical `write` call, fsynced before the call: `read_probe_log(path)` gives the count per
key, independently of the ledger's claim rows (>1 means the write was entered more than once).
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
