"""The headless subcommands: start (optionally supervising until the run ends), status, stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from collections.abc import Sequence

from temporalio.service import RPCError

from checkpoint_tui.config import Settings
from checkpoint_tui.errors import UserFacingError
from checkpoint_tui.ledger.faults import FaultSpec
from checkpoint_tui.ledger.store import HOST, connect, latest_run_id
from checkpoint_tui.ops import devserver, workers
from checkpoint_tui.ops.modelserver import stop_model_server
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.runs import start_run, wait_for_run
from checkpoint_tui.snapshot import Snapshot, build_snapshot, workflow_status


async def start_command(
    settings: Settings, steps: int, pace: float, fault_plan: Sequence[FaultSpec], wait: bool
) -> int:
    settings.ensure_dirs()
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    sup = Supervisor(settings, address, client, spare=wait)
    if wait:
        sup.acquire()  # respawn only if no other supervisor (e.g. the TUI) already owns this home
    sup.ensure_worker()
    run_id = await start_run(settings, client, steps, pace, fault_plan)
    print(run_id, flush=True)
    if not wait:
        return 0
    watch = asyncio.create_task(sup.run())
    try:
        status = await wait_for_run(settings, client, run_id, progress=True)
    finally:
        await sup.stop(stop_workers=False)
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    return 0 if status == "COMPLETED" else 1


async def status_command(settings: Settings, run_id: str | None, as_json: bool) -> int:
    conn = connect(settings.ledger)
    run_id = run_id or latest_run_id(conn)
    if run_id is None:
        raise UserFacingError(f"no runs yet in {settings.home}; start one with `checkpoint-tui start`")
    wf_status = await _peek_workflow_status(settings, run_id)
    try:
        snap = build_snapshot(conn, settings, run_id, wf_status)
    except LookupError as err:
        raise UserFacingError(str(err)) from None
    if as_json:
        print(json.dumps(snap.status_json(), indent=2, sort_keys=True))
    else:
        print(format_status(snap))
    return 0


async def _peek_workflow_status(settings: Settings, run_id: str) -> str | None:
    """Temporal's view if a server is reachable; status never starts a dev server."""
    if settings.embedded:
        ident, rec = devserver.recorded(settings)
        if ident is None or rec is None:
            return None
        address = rec["address"]
    else:
        address = settings.temporal_address or ""
    try:
        client = await connect_client(settings, address, timeout=3.0)
        return await workflow_status(client, run_id)
    except (UserFacingError, RPCError):
        return None


def format_status(snap: Snapshot) -> str:
    j = snap.status_json()
    lines = [
        f"run            {j['run_id']}",
        f"workflow       {j['workflow_status'] or 'unknown (Temporal not reachable)'}  (ledger: {j['run_status']})",
        f"steps          {j['completed_steps']}/{j['total_steps']} completed"
        + (f", missing {j['missing_steps']}" if j["missing_steps"] and j["run_status"] != "running" else ""),
        f"ledger         {j['ledger_rows']} rows · duplicates {j['duplicates']} · unstamped {j['unstamped_effects']}",
        "claims         " + " · ".join(f"{k} {v}" for k, v in j["outcomes"].items()),
        f"outbox         {j['outbox_lines']} lines · {j['outbox_duplicates']} repeated",
        f"notes          {j['notes_rows']} rows · {j['notes_duplicates']} repeated",
        f"artifacts      {j['artifact_files']} step files",
        f"workers        {', '.join(j['workers']) or '-'}"
        + (f"  (resumed at step {', '.join(map(str, j['resumed_steps']))})" if j["resumed_steps"] else ""),
        f"provider       {j['provider']}",
    ]
    if j["error"]:
        lines.append(f"error          {j['error']}")
    return "\n".join(lines)


def stop_command(settings: Settings) -> int:
    stopped = []
    for worker in workers.load_all(settings):
        workers.stop(settings, worker)
        workers.forget(settings, worker.role, worker.slot)
        stopped.append(f"{worker.role} worker {worker.pid}")
    if settings.embedded:
        pid = devserver.stop_devserver(settings)
        if pid is not None:
            stopped.append(f"dev server {pid}")
    pid = stop_model_server(settings)
    if pid is not None:
        stopped.append(f"model server {pid}")
    print("stopped " + ", ".join(stopped) if stopped else "nothing of this home was running")
    return 0


async def supervise_command(settings: Settings, pool: bool = False) -> int:
    """A headless supervisor for this home until SIGTERM/SIGINT (used by `chaos`; handy on a server).
    As `checkpoint-tui worker` (pool=True) it is one host's pool of a shared cluster and ledger."""
    settings.ensure_dirs()
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    sup = Supervisor(settings, address, client)
    if not sup.acquire():
        raise UserFacingError(f"another supervisor already owns {settings.home}")
    sup.ensure_worker()
    pids = ", ".join(str(w.pid) for w in sup.workers())
    if pool:
        print(
            f"pool on {HOST}: workers {pids} · task queue {settings.task_queue} · {address} "
            f"({settings.namespace}) · ledger {settings.ledger_label} · artifacts {settings.artifacts_dir}",
            flush=True,
        )
    else:
        print(f"supervising {settings.home}: worker {pids}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watch = asyncio.create_task(sup.run())
    await stop.wait()
    await sup.stop(stop_workers=pool)  # supervise: the worker keeps running and the next supervisor adopts it
    watch.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watch
    return 0
