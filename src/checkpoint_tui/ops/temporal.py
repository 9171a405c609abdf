"""Connecting to Temporal: the home's embedded dev server, or an external address."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from temporalio.client import Client
from temporalio.converter import DataConverter

from checkpoint_tui.errors import CheckpointError, Unavailable, UsageError
from checkpoint_tui.ops.codec_client import HttpCodec
from checkpoint_tui.ops.devserver import DevServer, ensure_devserver, recorded
from checkpoint_tui.ops.remote_codec import RemoteCodec
from checkpoint_tui.ops.user_worker import worker_env
from checkpoint_tui.settings import ConnectionOptions, Settings

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
            kwargs = {**settings.connection.client_kwargs(), **_converter(settings, address)}
            return await asyncio.wait_for(Client.connect(address, namespace=settings.namespace, **kwargs), remaining)
        except CheckpointError:  # bad TLS files: not something a retry fixes
            raise
        except Exception as err:  # RuntimeError from the bridge, TimeoutError, ...
            if (refused := refusal(str(err), settings.connection)) is not None:  # nor is a wrong key
                raise UsageError(f"Temporal at {address} refused the lab: {refused}") from None
            last = err
            await asyncio.sleep(0.2)
    where = "the embedded dev server" if settings.embedded else "--temporal-address / CHECKPOINT_TEMPORAL_ADDRESS"
    reason = str(last).splitlines()[0] if last and str(last) else type(last).__name__
    raise Unavailable(
        f"cannot reach Temporal at {address} (namespace {settings.namespace}) within {limit:.0f} s: {reason}. "
        f"Check {where}."
    )


def _converter(settings: Settings, address: str) -> dict:
    """With --data-converter, the team's converter as the client's payload codec (ops/remote_codec.py),
    its process started at the first payload from the workers' directory with their environment; with
    a codec server, that (ops/codec_client.py)."""
    if settings.codec is not None:
        return {"data_converter": DataConverter(payload_codec=HttpCodec(settings.codec, settings.namespace))}
    if not settings.data_converter:
        return {}
    cwd, env = settings.worker_cwd or Path.cwd(), worker_env(settings, address)
    return {"data_converter": DataConverter(payload_codec=RemoteCodec(settings.data_converter, cwd, env))}


async def reach(settings: Settings) -> str:
    """Before a proving command starts anything: the embedded dev server found or started, or a server
    the lab did not start connected to once (unreachable: exit 3 with nothing started). Its address."""
    address, _ = await asyncio.to_thread(resolve_address, settings)
    if not settings.embedded:
        await connect_client(settings, address)
    return address


# What a connection's failure says about the lab's credentials, as the SDK's core (tonic, rustls) words
# it: a server's certificate the lab cannot trust, or a server (or the TLS front before it) that
# turned the lab's key or certificate away. Anything else is the network's, and retried.
_REFUSALS = (
    ("UnknownIssuer", "its certificate is not signed by a CA the lab trusts (the server CA given, or the system's)"),
    ("NotValidForName", "its certificate is not for the name the lab checks (set the TLS server name)"),
    ("CertificateRequired", "it wants a client certificate and the lab has none"),
    ("BadCertificate", "it rejected the client certificate"),
    ("UnknownCA", "it rejected the client certificate (not signed by a CA it trusts)"),
)


_UNAUTHORIZED = ("401 Unauthorized", "403 Forbidden", "Unauthenticated", "PermissionDenied")


def refusal(message: str, conn: ConnectionOptions) -> str | None:
    """Which of the lab's credentials a failed connection names, in one line that repeats none of them;
    None: not a refusal."""
    for marker, said in _REFUSALS:
        if marker in message:
            return said
    if any(m in message for m in _UNAUTHORIZED):
        return "it rejected the API key" if conn.api_key else "it wants credentials (an API key) and the lab has none"
    if "400 Bad Request" in message:  # what a TLS front (nginx's ssl_verify_client) answers: a guess, said as one
        if conn.tls_cert or conn.tls_cert_data:
            return "it answered 400 Bad Request, as a TLS front does when it rejected the client certificate"
        return "it answered 400 Bad Request, as a TLS front does when it wants a client certificate (none given)"
    return None
