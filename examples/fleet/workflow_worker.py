"""The fleet's workflow worker, version 1: `python examples/fleet/workflow_worker.py` (any working
directory). `workflow_worker_v2.py` is the same worker with version 2 of the workflow.

Connects with the SDK's environment configuration (`TEMPORAL_ADDRESS`, default 127.0.0.1:7233;
`TEMPORAL_NAMESPACE`, default `default`; TLS and API key variables as the SDK reads them), polls
`CHECKPOINT_TASK_QUEUE` (default `fleet-workflows`) for `FleetMailer`'s workflow tasks only, and runs
until SIGTERM or SIGINT. It runs no activity: the activity workers do (activity_worker.py).

With `TEMPORAL_DEPLOYMENT_NAME` and `TEMPORAL_WORKER_BUILD_ID` set (as Temporal's Worker Controller sets
them, and the lab with --deployment), it polls as that Worker Deployment Version (Worker Versioning), its
workflows `--versioning auto-upgrade` (the default) or `--versioning pinned`."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from datetime import timedelta

from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.envconfig import ClientConfig
from temporalio.worker import Worker, WorkerDeploymentConfig

# the sibling modules: `python workflow_worker.py` puts this folder on sys.path
from shared import DEFAULT_WORKFLOW_QUEUE, exit_stopped
from workflows import FleetMailer

DEFAULT_ADDRESS = "127.0.0.1:7233"
log = logging.getLogger("fleet.workflow_worker")


async def run(workflow: type, version: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    client = await Client.connect(**config)
    task_queue = os.environ.get("CHECKPOINT_TASK_QUEUE") or DEFAULT_WORKFLOW_QUEUE
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[workflow],
        # A stopped worker's sticky queue holds a run's next task this long before Temporal gives it
        # to another workflow worker (the SDK's default is 10 s: every restart or deploy would cost that).
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        graceful_shutdown_timeout=timedelta(seconds=1),  # workflow tasks are short: nothing to wait for
        deployment_config=deployment_config(),
    )
    async with worker:
        log.info("FleetMailer %s polling %s on %s (pid %d)", version, task_queue, config["target_host"], os.getpid())
        await stop.wait()
    log.info("stopped")


def deployment_config() -> WorkerDeploymentConfig | None:
    """The Worker Deployment Version this worker is, from the environment; None: unversioned."""
    name, build = os.environ.get("TEMPORAL_DEPLOYMENT_NAME"), os.environ.get("TEMPORAL_WORKER_BUILD_ID")
    if not (name and build):
        return None
    choice = versioning(sys.argv[1:])
    behaviors = {"pinned": VersioningBehavior.PINNED, "auto-upgrade": VersioningBehavior.AUTO_UPGRADE}
    if choice not in behaviors:
        raise SystemExit(f"--versioning {choice[:40]!r}: pinned or auto-upgrade")
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=name, build_id=build),
        use_worker_versioning=True,
        default_versioning_behavior=behaviors[choice],
    )


def versioning(args: list[str]) -> str:
    """`--versioning X` or `--versioning=X` (default auto-upgrade); a flag with no value is an error."""
    for i, arg in enumerate(args):
        if arg.startswith("--versioning="):
            return arg.split("=", 1)[1]
        if arg == "--versioning":
            return args[i + 1] if i + 1 < len(args) else ""
    return "auto-upgrade"


def main(workflow: type = FleetMailer, version: str = "v1") -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    asyncio.run(run(workflow, version))
    exit_stopped()


if __name__ == "__main__":
    main()
