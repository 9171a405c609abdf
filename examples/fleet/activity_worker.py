"""The fleet's activity worker: `python examples/fleet/activity_worker.py` (any working directory).

Connects as workflow_worker.py does, polls `FLEET_ACTIVITY_QUEUE` (else `CHECKPOINT_TASK_QUEUE`, as
the lab sets it for each command of a fleet; default `fleet-activities`) for activities only
(`send_receipt`, `check_mail_api`), at most a few at once, and sends receipts to the mail API at
`MAIL_API` (HOST:PORT; unset: to `EXAMPLE_OUT_DIR/receipts.jsonl`, default `$CHECKPOINT_HOME/fleet-out`).
The effects library finds its ledger through `CHECKPOINT_LEDGER_URL` or `CHECKPOINT_HOME`. SIGTERM or
SIGINT stops it gracefully: no new task is taken, and the running ones have 5 s to finish before
they are cancelled (and retried elsewhere). With `--exit-on-sigterm` it is a worker without a graceful
shutdown instead (it exits at once on SIGTERM): what a rollout then loses, the game day names."""

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

from activities import MailApi, ReceiptActivities  # the sibling modules: this folder is on sys.path
from shared import DEFAULT_ACTIVITY_QUEUE, exit_stopped

DEFAULT_ADDRESS = "127.0.0.1:7233"
MAX_CONCURRENT = 4  # a mail API takes a few sends at once, not a worker's default hundred
log = logging.getLogger("fleet.activity_worker")


def out_file() -> Path:
    explicit, home = os.environ.get("EXAMPLE_OUT_DIR"), os.environ.get("CHECKPOINT_HOME")
    if explicit:
        return Path(explicit).expanduser().absolute() / "receipts.jsonl"
    return (Path(home).expanduser() if home else Path.cwd()).absolute() / "fleet-out" / "receipts.jsonl"


def _exit_now() -> None:
    logging.shutdown()
    os._exit(0)


async def run(mail_api: MailApi | None, abrupt: bool = False) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _exit_now if abrupt and sig == signal.SIGTERM else stop.set)
    effects.ledger_target(), effects.probe_log_path()  # a missing location is one line now, not per activity
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    client = await Client.connect(**config)
    # the lab (and any supervisor that tells each command its queue) sets CHECKPOINT_TASK_QUEUE
    env_queue = os.environ.get("FLEET_ACTIVITY_QUEUE") or os.environ.get("CHECKPOINT_TASK_QUEUE")
    task_queue = env_queue or DEFAULT_ACTIVITY_QUEUE
    receipts = ReceiptActivities(mail_api, out_file())
    worker = Worker(
        client,
        task_queue=task_queue,
        activities=[receipts.send_receipt, receipts.check_mail_api],
        max_concurrent_activities=MAX_CONCURRENT,
        graceful_shutdown_timeout=timedelta(seconds=5),  # longer than a send's HTTP timeout
    )
    async with worker:  # leaving the block is worker.shutdown(): stop polling, wait for running activities
        target = f"{mail_api.host}:{mail_api.port}" if mail_api else receipts.out_file
        log.info("polling %s on %s, receipts to %s (pid %d)", task_queue, config["target_host"], target, os.getpid())
        await stop.wait()
        log.info("stopping: running activities have 5 s")
    effects.close()
    log.info("stopped")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        mail_api = MailApi.parse(os.environ["MAIL_API"]) if os.environ.get("MAIL_API") else None
    except ValueError as err:
        sys.exit(f"activity_worker: {err}")
    try:
        asyncio.run(run(mail_api, abrupt="--exit-on-sigterm" in sys.argv[1:]))
    except effects.EffectsConfigError as err:
        sys.exit(f"activity_worker: {err}")
    exit_stopped()


if __name__ == "__main__":
    main()
