"""Connecting to Temporal: the home's embedded dev server, or an external address."""

from __future__ import annotations

import asyncio
import time

from temporalio.client import Client

from checkpoint_tui.errors import CheckpointError, Unavailable
from checkpoint_tui.ops.devserver import DevServer, ensure_devserver
from checkpoint_tui.settings import Settings

EXTERNAL_CONNECT_TIMEOUT_S = 5.0


def resolve_address(settings: Settings) -> tuple[str, DevServer | None]:
    """The address to use; for the embedded default this finds or starts the dev server."""
    if settings.embedded:
        server = ensure_devserver(settings)
        return server.address, server
    return settings.temporal_address or "", None


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
