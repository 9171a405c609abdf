"""Naive loop vs durable loop, side by side: the same task, the same SIGKILL right after step K's
email went out, then a restart. Counts are read back from the outbox files and SQLite."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from dataclasses import dataclass

from checkpoint_tui.config import Settings
from checkpoint_tui.ledger.effects import outbox_path
from checkpoint_tui.ledger.store import connect, now
from checkpoint_tui.ops import workers
from checkpoint_tui.ops.procs import send_signal_if_ours
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.runs import new_run_id, start_run, wait_for_run
from checkpoint_tui.snapshot import outbox_counts


@dataclass(frozen=True)
class Side:
    run_id: str
    emails: int  # outbox lines
    repeated: int  # outbox lines beyond the first per email
    notes_repeated: int
    ledger_duplicates: int | None  # None: the naive loop has no ledger


@dataclass(frozen=True)
class Comparison:
    steps: int
    kill_step: int
    naive: Side
    durable: Side


def read_comparison(settings: Settings) -> Comparison | None:
    """The latest comparison, its counts computed now from the files and SQLite."""
    conn = connect(settings.ledger)
    row = conn.execute("SELECT * FROM comparisons ORDER BY id DESC LIMIT 1").fetchone()
    if row is None:
        return None
    return Comparison(row["steps"], row["kill_step"], _side(settings, row["naive_run"], False),
                      _side(settings, row["durable_run"], True))  # fmt: skip


def _side(settings: Settings, run_id: str, ledger: bool) -> Side:
    conn = connect(settings.ledger)
    lines, repeated = outbox_counts(outbox_path(settings.artifacts_dir, run_id))
    notes = conn.execute(
        "SELECT COUNT(*) - COUNT(DISTINCT effect_id) FROM notes WHERE run_id = ?", (run_id,)
    ).fetchone()[0]
    dup = None
    if ledger:
        dup = conn.execute("SELECT COUNT(*) - COUNT(DISTINCT id) FROM effects WHERE run_id = ?", (run_id,)).fetchone()[
            0
        ]
    return Side(run_id, lines, repeated, notes, dup)


async def _until_email(settings: Settings, run_id: str, step: int, timeout: float = 60.0) -> None:
    path = outbox_path(settings.artifacts_dir, run_id)
    prefix = f"{run_id}:{step}:email\t"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(line.startswith(prefix) for line in path.read_text().splitlines()):
            return
        await asyncio.sleep(0.005)
    raise TimeoutError(f"step {step}'s email never went out in {run_id}")


async def _naive_side(settings: Settings, steps: int, kill_step: int, pace: float) -> str:
    run_id = "naive-" + new_run_id().removeprefix("run-")
    argv = [sys.executable, "-m", "checkpoint_tui.naive", "--home", str(settings.home), "--run", run_id,
            "--steps", str(steps), "--pace", str(pace)]  # fmt: skip
    log = open(settings.run_dir / "naive.log", "ab")  # noqa: SIM115 - closed below
    try:
        child = await asyncio.create_subprocess_exec(*argv, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL)
        await _until_email(settings, run_id, kill_step)
        child.send_signal(signal.SIGKILL)  # after the email, before "mark complete"
        await child.wait()
        restarted = await asyncio.create_subprocess_exec(
            *argv, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL
        )
        await restarted.wait()  # it starts again from step 1: its progress was in memory
    finally:
        log.close()
    return run_id


async def _durable_side(settings: Settings, steps: int, kill_step: int, pace: float) -> str:
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    sup = Supervisor(settings, address, client)
    owner = sup.acquire()
    sup.ensure_worker()
    watch = asyncio.create_task(sup.run()) if owner else None
    try:
        run_id = await start_run(settings, client, steps, pace)
        await _until_email(settings, run_id, kill_step)
        if owner:
            await sup.kill(reason=f"compare: right after step {kill_step}'s email")
        else:
            worker = workers.load(settings, "active")
            if worker is not None:
                send_signal_if_ours(worker.ident, signal.SIGKILL)
        await wait_for_run(settings, client, run_id, timeout=120)
    finally:
        await sup.stop(stop_workers=False)
        if watch is not None:
            watch.cancel()
    return run_id


async def compare_command(settings: Settings, steps: int, kill_step: int, pace: float = 0.2) -> int:
    if not 1 <= kill_step < steps:
        from checkpoint_tui.errors import UserFacingError

        raise UserFacingError(f"--kill-at must be between 1 and {steps - 1}")
    settings.ensure_dirs()
    naive = await _naive_side(settings, steps, kill_step, pace)
    durable = await _durable_side(settings, steps, kill_step, pace)
    conn = connect(settings.ledger)
    conn.execute(
        "INSERT INTO comparisons(naive_run, durable_run, steps, kill_step, created_at) VALUES(?,?,?,?,?)",
        (naive, durable, steps, kill_step, now()),
    )
    c = read_comparison(settings)
    assert c is not None
    print(f"same task ({steps} steps), same SIGKILL right after step {kill_step}'s email, then a restart:")
    for name, side in (("naive", c.naive), ("durable", c.durable)):
        ledger = "no ledger" if side.ledger_duplicates is None else f"ledger duplicates {side.ledger_duplicates}"
        print(f"  {name:<8} emails sent {side.emails:>3} (repeated {side.repeated}) · notes repeated "
              f"{side.notes_repeated} · {ledger}   [{side.run_id}]")  # fmt: skip
    return 0 if c.durable.repeated == 0 and c.durable.ledger_duplicates == 0 else 1
