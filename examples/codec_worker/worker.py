"""The example's worker: `python examples/codec_worker/worker.py` (any working directory). As
examples/user_worker's, but its client converts every payload with the team's converter and codec
(codec.py): `CodecMailer`'s input, activities and results are encrypted in Temporal's history.
Emails go to `$CHECKPOINT_HOME/codec-out/outbox.jsonl` (else `./codec-out/`)."""

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

from activities import MailActivities  # the sibling modules: `python worker.py` puts this folder on sys.path
from codec import converter
from workflows import CodecMailer

log = logging.getLogger("codec_worker")


async def run() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    effects.ledger_target(), effects.probe_log_path()  # a missing location is one line now, not per activity
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", "127.0.0.1:7233")
    client = await Client.connect(**config, data_converter=converter())
    task_queue = os.environ.get("CHECKPOINT_TASK_QUEUE") or "codec-worker-example"
    home = os.environ.get("CHECKPOINT_HOME")
    mail = MailActivities((Path(home).expanduser() if home else Path.cwd()).absolute() / "codec-out")
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[CodecMailer],
        activities=[mail.ask_model, mail.send_email],
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),  # a killed worker's runs move on in 1 s
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
    async with worker:
        log.info("polling %s on %s (pid %d)", task_queue, config["target_host"], os.getpid())
        await stop.wait()
    effects.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(run())
    except effects.EffectsConfigError as err:
        sys.exit(f"codec_worker: {err}")
    logging.shutdown()  # then no interpreter finalization: the SDK's threads may abort it (sdk-python#300)
    os._exit(0)


if __name__ == "__main__":
    main()
