"""The example's worker: `python examples/user_worker/worker.py` (any working directory).

Connects with the SDK's environment configuration (`TEMPORAL_ADDRESS`, default 127.0.0.1:7233;
`TEMPORAL_NAMESPACE`, default `default`; TLS and API key variables as the SDK reads them), polls the
task queue `CHECKPOINT_TASK_QUEUE` (default `user-worker-example`) with the SDK's default identity (pid@host),
and serves the workflows `SendLines`, `SendLinesKeyed`, `SendLinesUnguarded`, `SendLinesIdempotent` and
`SendLinesNested` (with its child `SendLinesLevel`) until SIGTERM or SIGINT.
The lines go to `EXAMPLE_OUT_DIR` (default `$CHECKPOINT_HOME/example-out`, else `./example-out`); the
effects library finds its ledger through `CHECKPOINT_LEDGER_URL` or `CHECKPOINT_HOME`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.envconfig import ClientConfig
from temporalio.worker import Worker

import checkpoint_tui.effects as effects

from activities import LineActivities  # the sibling modules: `python worker.py` puts this folder on sys.path
from shared import DEFAULT_TASK_QUEUE
from workflows import (
    SendLines,
    SendLinesIdempotent,
    SendLinesKeyed,
    SendLinesLevel,
    SendLinesNested,
    SendLinesUnguarded,
)

DEFAULT_ADDRESS = "127.0.0.1:7233"
log = logging.getLogger("user_worker")


def out_dir() -> Path:
    explicit, home = os.environ.get("EXAMPLE_OUT_DIR"), os.environ.get("CHECKPOINT_HOME")
    if explicit:
        return Path(explicit).expanduser().absolute()
    return (Path(home).expanduser() if home else Path.cwd()).absolute() / "example-out"


async def run() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    effects.ledger_target(), effects.probe_log_path()  # a missing location is one line now, not per activity
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    client = await Client.connect(**config)
    task_queue = os.environ.get("CHECKPOINT_TASK_QUEUE") or DEFAULT_TASK_QUEUE
    lines = LineActivities(out_dir())
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[SendLines, SendLinesKeyed, SendLinesUnguarded, SendLinesIdempotent, SendLinesNested, SendLinesLevel],
        activities=[lines.send_line, lines.send_line_keyed, lines.send_line_unguarded, lines.send_line_idempotent],
        # A killed worker's sticky queue holds the workflow's next task this long before Temporal
        # gives it to another worker (the SDK's default is 10 s: every kill would cost that much).
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
    async with worker:
        log.info("polling %s on %s (pid %d)", task_queue, config["target_host"], os.getpid())
        await stop.wait()
    effects.close()
    log.info("stopped")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(run())
    except effects.EffectsConfigError as err:
        sys.exit(f"user_worker: {err}")
    exit_stopped()


def exit_stopped() -> None:
    """Exit 0 without the interpreter's finalization: the SDK's Rust threads may still reach for Python
    while it finalizes and abort the process after a clean stop (exit 134, "PyGILState_Release";
    temporalio/sdk-python#300), which a supervisor, and a game day's rollout, would count as a crash.
    Everything is stopped and closed by now; only the logs need flushing."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
