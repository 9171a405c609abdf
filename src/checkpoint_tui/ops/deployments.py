"""A Worker Deployment's routing, through Temporal's API (Worker Versioning, --deployment): which version
gets new workflows (current), a share of them (ramping), and whether a version's workers poll yet.

A version exists once one of its workers polls; only then can it be made current or ramping. The lab
runs its fleet's --deploy queue as one deployment: version 1 the --worker command, version 2 the --deploy
command (settings.build_id), each build id a digest of its command.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from datetime import timedelta

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
    SetWorkerDeploymentRampingVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.errors import Unavailable, UsageError
from checkpoint_tui.ops import fleet
from checkpoint_tui.settings import Settings

IDENTITY = "checkpoint-tui"  # who changed the routing, as Temporal records it
REGISTER_WAIT_S = 30.0  # a version's first poll reaches the deployment within this (0.1-1 s measured)
API_TIMEOUT_S = 10.0


async def _describe(client: Client, settings: Settings):
    request = DescribeWorkerDeploymentRequest(namespace=settings.namespace, deployment_name=_name(settings))
    return await client.workflow_service.describe_worker_deployment(request, timeout=_timeout())


def _name(settings: Settings) -> str:
    assert settings.deployment, "a Worker Deployment's routing without --deployment"
    return settings.deployment


def _timeout() -> timedelta:
    return timedelta(seconds=API_TIMEOUT_S)


async def builds(client: Client, settings: Settings) -> tuple[list[str], str | None, str | None]:
    """The deployment's versions (build ids), its current one and its ramping one (None: none yet)."""
    try:
        info = (await _describe(client, settings)).worker_deployment_info
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return [], None, None
        raise Unavailable(f"Worker Deployment {settings.deployment}: {err.message[:200]}") from None
    found = [v.deployment_version.build_id for v in info.version_summaries]
    routing = info.routing_config
    current = routing.current_deployment_version.build_id or None
    ramping = routing.ramping_deployment_version.build_id or None
    return found, current, ramping


async def registered(client: Client, settings: Settings, build_id: str, timeout: float = REGISTER_WAIT_S) -> float:
    """Seconds until the version's workers polled (the version exists); Unavailable past `timeout`."""
    began = time.monotonic()
    while True:
        if build_id in (await builds(client, settings))[0]:
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise Unavailable(
                f"Worker Deployment {settings.deployment}: version {build_id} never polled in {timeout:.0f} s "
                f"(its worker must read TEMPORAL_DEPLOYMENT_NAME and TEMPORAL_WORKER_BUILD_ID: docs/gameday.md)"
            )
        await asyncio.sleep(0.1)


async def set_current(client: Client, settings: Settings, build_id: str) -> None:
    """New workflows, and auto-upgrade ones at their next workflow task, go to this version."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=settings.namespace, deployment_name=_name(settings), build_id=build_id, identity=IDENTITY
    )
    await _call(client.workflow_service.set_worker_deployment_current_version(request, timeout=_timeout()), settings)


async def set_ramping(client: Client, settings: Settings, build_id: str, percent: float) -> None:
    """`percent` of new workflows (and of auto-upgrade ones) go to this version, the rest to the current;
    build id "" ends a ramp (making another version current does not)."""
    request = SetWorkerDeploymentRampingVersionRequest(
        namespace=settings.namespace,
        deployment_name=_name(settings),
        build_id=build_id,
        percentage=percent,
        identity=IDENTITY,
    )
    await _call(client.workflow_service.set_worker_deployment_ramping_version(request, timeout=_timeout()), settings)


async def _call(call: Awaitable[object], settings: Settings) -> None:
    try:
        await call
    except RPCError as err:
        raise Unavailable(f"Worker Deployment {settings.deployment}: {err.message[:200]}") from None


def old_and_new(settings: Settings) -> tuple[str, str]:
    """The build ids of version 1 (the --worker command) and version 2 (the --deploy command)."""
    new = settings.versions[0]
    old = next((m for m in settings.members if m.queue == new.queue), None)
    if old is None or old.build_id is None or new.build_id is None:
        raise UsageError(f"--deployment: no worker command polls {new.queue}, the --deploy queue")
    return old.build_id, new.build_id


async def settle(settings: Settings, client: Client, force: bool = False) -> None:
    """Version 1 current once its workers poll, unless version 2 is deployed (then the deploy routes it,
    and a rollback leaves it running; `force`: version 1 all the same): a new experiment starts from
    version 1, whatever the last one left current. With --deployment the lab owns the deployment's
    routing: every command that starts the fleet does this."""
    if settings.versions[0].queue in fleet.deployed(settings) and not force:
        return
    old, _ = old_and_new(settings)
    await registered(client, settings, old)
    _, current, ramping = await builds(client, settings)
    if ramping is not None:  # an experiment ended mid-ramp: making version 1 current would leave the ramp on
        await set_ramping(client, settings, "", 0.0)
    if current != old:
        await set_current(client, settings, old)
