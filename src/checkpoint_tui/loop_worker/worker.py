"""The worker process: `python -m checkpoint_tui.worker --home H --address A --task-queue Q --identity I`.

With --standby it connects and builds everything, then waits for SIGUSR1 before polling: a warm
spare the supervisor promotes the moment the active worker dies (only one worker polls at a time).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.activities import AgentActivities
from checkpoint_tui.loop_worker.liveness import beat_forever
from checkpoint_tui.loop_worker.workflow import AgentLoop
from checkpoint_tui.settings import ConnectionOptions, Settings, load_settings

STICKY_TIMEOUT = timedelta(seconds=1)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="checkpoint_tui.worker", description=__doc__)
    p.add_argument("--home", required=True, type=Path)
    p.add_argument("--address", required=True)
    p.add_argument("--namespace", default="default")
    p.add_argument("--task-queue", required=True)
    p.add_argument("--identity", required=True)
    p.add_argument("--artifacts", type=Path, help="artifacts root (default: HOME/artifacts)")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--tls-ca")
    p.add_argument("--tls-server-name")
    p.add_argument("--sticky-timeout", type=float, default=STICKY_TIMEOUT.total_seconds(), metavar="S")
    p.add_argument("--standby", action="store_true", help="connect, then wait for SIGUSR1 before polling")
    return p.parse_args(argv)


def worker_settings(args: argparse.Namespace) -> Settings:
    """Flags from the supervisor; secrets (ledger URL, API keys) from the environment it set."""
    return load_settings(
        home=args.home,
        temporal_address=args.address,
        namespace=args.namespace,
        # inline TLS data comes from the environment the lab set (load_settings reads it), never a flag
        connection=ConnectionOptions(args.tls_cert, args.tls_key, args.tls_ca, tls_server_name=args.tls_server_name),
        artifacts=args.artifacts,
        task_queue=args.task_queue,
    )


async def run_worker(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    promote = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, promote.set)

    settings = worker_settings(args)
    beat = asyncio.create_task(beat_forever(settings.beat_file(os.getpid())))  # see loop_worker/liveness.py
    try:
        await _serve(args, settings, stop, promote)
    finally:
        beat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beat


async def _serve(args: argparse.Namespace, settings: Settings, stop: asyncio.Event, promote: asyncio.Event) -> None:
    client = await Client.connect(
        args.address, namespace=args.namespace, identity=args.identity, **settings.connection.client_kwargs()
    )
    acts = AgentActivities(settings)
    worker = Worker(
        client,
        task_queue=args.task_queue,
        workflows=[AgentLoop],
        activities=acts.all(),
        identity=args.identity,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=args.sticky_timeout),
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
    connect(settings.ledger)  # this (the event loop's) thread runs the activities: open their connection now
    ready = settings.run_dir / f"ready-{args.identity}"
    ready.write_text(f"{os.getpid()}\n")
    if args.standby:
        logging.info("standby worker %s ready (pid %d); waiting for SIGUSR1", args.identity, os.getpid())
        waiters = [asyncio.create_task(promote.wait()), asyncio.create_task(stop.wait())]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            ready.unlink(missing_ok=True)
            return
    logging.info("worker %s polling %s (pid %d)", args.identity, args.task_queue, os.getpid())
    try:
        async with worker:
            await stop.wait()
    finally:
        ready.unlink(missing_ok=True)
    logging.info("worker %s stopped", args.identity)


def main(argv: list[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # its INFO lines carry request URLs into worker.log
    args = parse_args(argv)
    try:
        asyncio.run(run_worker(args))
    except Exception:
        logging.exception("worker failed")
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: the SDK's native threads can crash it (see notes/temporal-facts.md).
    os._exit(0)
