"""Connecting to Temporal: the home's embedded dev server, or an external address."""

from __future__ import annotations

import asyncio
import time

from temporalio.client import Client

from checkpoint_tui.errors import CheckpointError, Unavailable
from checkpoint_tui.ops.devserver import DevServer, ensure_devserver, recorded
from checkpoint_tui.settings import Settings

EXTERNAL_CONNECT_TIMEOUT_S = 5.0


def resolve_address(settings: Settings) -> tuple[str, DevServer | None]:
    """The address to use; for the embedded default this finds or starts the dev server."""
    if settings.embedded:
        server = ensure_devserver(settings)
        return server.address, server
    return settings.temporal_address or "", None


def lab_address(settings: Settings) -> str:
    """The address of the Temporal a lab already set up runs against: the external one, else the home's
    dev server as recorded when it was started or adopted (gone since: Unavailable)."""
    if not settings.embedded:
        return settings.temporal_address or ""
    record = recorded(settings)[1]
    if record is None:
        raise Unavailable(f"this home's dev server stopped (see {settings.run_dir / 'temporal.log'})")
    return str(record["address"])


async def connect_client(settings: Settings, address: str, timeout: float | None = None) -> Client:
    """Connect, retrying until `timeout`; an unreachable server is a one-line Unavailable."""
    limit = timeout if timeout is not None else (20.0 if settings.embedded else EXTERNAL_CONNECT_TIMEOUT_S)
    deadline = time.monotonic() + limit
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            remaining = max(0.5, deadline - time.monotonic())
            return await asyncio.wait_for(
                Client.connect(address, namespace=settings.namespace, **settings.connection.client_kwargs()), remaining
            )
        except CheckpointError:  # bad TLS files: not something a retry fixes
            raise
        except Exception as err:  # RuntimeError from the bridge, TimeoutError, ...
            last = err
            await asyncio.sleep(0.2)
    where = "the embedded dev server" if settings.embedded else "--temporal-address / CHECKPOINT_TEMPORAL_ADDRESS"
    reason = str(last).splitlines()[0] if last and str(last) else type(last).__name__
    raise Unavailable(
        f"cannot reach Temporal at {address} (namespace {settings.namespace}) within {limit:.0f} s: {reason}. "
        f"Check {where}."
    )


async def reach(settings: Settings) -> str:
    """Before a proving command starts anything: the embedded dev server found or started, or a server
    the lab did not start connected to once (unreachable: exit 3 with nothing started). Its address."""
    address, _ = await asyncio.to_thread(resolve_address, settings)
    if not settings.embedded:
        await connect_client(settings, address)
    return address
