"""Naive loop vs durable loop, side by side: the same task, the same SIGKILL right after step K's
email went out, then a restart. Counts are read back from the outbox files and SQLite."""

from __future__ import annotations

import asyncio
import signal
import sys

from checkpoint_tui.core.comparison import read_comparison
from checkpoint_tui.core.runs import new_run_id, start_run, wait_for_run
from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger.artifacts import email_sent, outbox_path
from checkpoint_tui.ledger.effects import effect_id
from checkpoint_tui.ledger.store import connect, record_comparison
from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.procs import send_signal_if_ours
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until

EMAIL_WAIT_S = 60.0


async def _until_email(settings: Settings, run_id: str, step: int) -> None:
    path = outbox_path(settings.artifacts_dir, run_id)
    eid = effect_id(run_id, step, "email")
    await wait_until(lambda: email_sent(path, eid), EMAIL_WAIT_S, every=0.005, what=f"step {step}'s email in {run_id}")


async def _naive_side(settings: Settings, steps: int, kill_step: int, pace: float) -> str:
    run_id = "naive-" + new_run_id().removeprefix("run-")
    argv = [
        sys.executable,
        "-m",
        "checkpoint_tui.loop_worker.naive",
        "--home",
        str(settings.home),
        "--run",
        run_id,
        "--steps",
        str(steps),
        "--pace",
        str(pace),
    ]
    log = open_log(settings.run_dir, "naive.log")  # capped and rotated (ops/logcap.py)
    try:
        env = settings.child_env()  # the same ledger and artifacts root, handed on without a command line
        child = await asyncio.create_subprocess_exec(
            *argv, stdout=log.fd, stderr=log.fd, stdin=asyncio.subprocess.DEVNULL, env=env
        )
        await _until_email(settings, run_id, kill_step)
        child.send_signal(signal.SIGKILL)  # after the email, before "mark complete"
        await child.wait()
        restarted = await asyncio.create_subprocess_exec(
            *argv, stdout=log.fd, stderr=log.fd, stdin=asyncio.subprocess.DEVNULL, env=env
        )
        await restarted.wait()  # it starts again from step 1: its progress was in memory
    finally:
        log.close()
    return run_id


async def _durable_side(settings: Settings, steps: int, kill_step: int, pace: float) -> str:
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    sup = Supervisor(settings, address)
    owner = sup.acquire()
    await asyncio.to_thread(sup.ensure_worker)
    async with sup.running():
        run_id = await start_run(settings, client, steps, pace)
        await _until_email(settings, run_id, kill_step)
        if owner:
            await sup.kill(reason=f"compare: right after step {kill_step}'s email")
        else:  # another supervisor (the app) owns the home: it will respawn; we only kill
            worker = worker_proc.load(settings, "active")
            if worker is not None:
                send_signal_if_ours(worker.ident, signal.SIGKILL)
        await wait_for_run(settings, client, run_id, timeout=120)
    return run_id


async def compare_command(settings: Settings, steps: int, kill_step: int, pace: float = 0.2) -> int:
    if not 1 <= kill_step < steps:
        raise UsageError(f"--kill-at must be between 1 and {steps - 1}")
    settings.ensure_dirs()
    naive = await _naive_side(settings, steps, kill_step, pace)
    durable = await _durable_side(settings, steps, kill_step, pace)
    record_comparison(connect(settings.ledger), naive, durable, steps, kill_step)
    c = read_comparison(settings)
    assert c is not None
    print(f"same task ({steps} steps), same SIGKILL right after step {kill_step}'s email, then a restart:")
    for name, side in (("naive", c.naive), ("durable", c.durable)):
        ledger = "no ledger" if side.ledger_duplicates is None else f"ledger duplicates {side.ledger_duplicates}"
        print(
            f"  {name:<8} emails sent {side.emails:>3} (repeated {side.repeated}) · notes repeated "
            f"{side.notes_repeated} · {ledger}   [{side.run_id}]"
        )
    return 0 if c.durable.repeated == 0 and c.durable.ledger_duplicates == 0 else 1
