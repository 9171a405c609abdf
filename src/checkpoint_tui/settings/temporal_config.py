"""Temporal's environment configuration for the lab: a profile of a TOML file and the `TEMPORAL_*`
variables, read as every SDK and the `temporal` CLI read them (temporalio.envconfig), under the lab's
own flags (Temporal's precedence: flags, then the environment, then the file's profile).

It is read when asked for: `--profile` / `--config-file`, `TEMPORAL_PROFILE` / `TEMPORAL_CONFIG_FILE`,
or `TEMPORAL_ADDRESS`. Otherwise the lab starts its own dev server, whatever a default file
(~/.config/temporalio/temporal.toml) says: an embedded lab never moves onto a cluster unasked.

The lab's children get what it resolved, in Temporal's own variable names (ops/user_worker.py,
Settings.child_env), never the file or the profile's name: each reads one answer. No message here
repeats a value of the file (a TOML error's own text shows the line, which may hold a key)."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.settings.connection import ConnectionOptions

MAX_CONFIG_BYTES = 1 << 20  # a client configuration file is a few hundred bytes
ASKING = ("TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE", "TEMPORAL_ADDRESS")


@dataclass(frozen=True)
class TemporalTarget:
    """Where and how to reach Temporal, as the configuration says (None: it says nothing of it)."""

    address: str | None
    namespace: str | None
    connection: ConnectionOptions
    source: str  # for messages: "profile staging of temporal.toml", "the environment"


def asked(profile: str | None, config_file: str | None, environ: Mapping[str, str] = os.environ) -> bool:
    return bool(profile or config_file or any(environ.get(name) for name in ASKING))


def load_target(
    profile: str | None, config_file: str | None, environ: Mapping[str, str] = os.environ
) -> TemporalTarget | None:
    """The configuration's target, or None where nothing asks for one; exit 2 on a file that cannot be
    read or parsed, or a profile it does not have."""
    if not asked(profile, config_file, environ):
        return None
    from temporalio.envconfig import ClientConfigProfile

    name = profile or environ.get("TEMPORAL_PROFILE") or None
    path = config_file or environ.get("TEMPORAL_CONFIG_FILE") or None
    data = _read(Path(path).expanduser()) if path else None
    where = f"profile {name or 'default'} of {path}" if path else "the environment"
    try:
        found = ClientConfigProfile.load(
            name,
            config_source=data,
            disable_file=data is None and name is None,  # a default file is read only for a named profile
            override_env_vars=dict(environ),
        )
    except Exception as err:  # the bridge's ConfigError; its later lines may quote the file
        first = (str(err).splitlines() or [type(err).__name__])[0][:200]
        raise UsageError(f"Temporal configuration ({where}): {first}") from None
    return TemporalTarget(found.address or None, found.namespace or None, _connection(found), where)


def _read(path: Path) -> bytes:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"--config-file {path}: not a regular file")
        if info.st_size > MAX_CONFIG_BYTES:
            raise UsageError(
                f"--config-file {path}: over {MAX_CONFIG_BYTES >> 20} MiB (a client configuration is small)"
            )
        return path.read_bytes()[: MAX_CONFIG_BYTES + 1]
    except OSError as err:
        raise UsageError(f"cannot read --config-file {path}: {err.strerror or err}") from None


def _connection(found: object) -> ConnectionOptions:
    """The profile's API key and TLS as the lab's ConnectionOptions: a path stays a path, inline data
    stays data (neither is copied to disk)."""
    tls = getattr(found, "tls", None)
    api_key = getattr(found, "api_key", None) or None
    if tls is None:
        return ConnectionOptions(api_key=api_key)

    def path(source: object) -> str | None:
        return str(source) if isinstance(source, Path) else None

    def data(source: object) -> bytes | None:
        if isinstance(source, str):
            return source.encode()
        return bytes(source) if isinstance(source, bytes | bytearray) else None

    return ConnectionOptions(
        tls_cert=path(tls.client_cert),
        tls_key=path(tls.client_private_key),
        tls_ca=path(tls.server_root_ca_cert),
        api_key=api_key,
        tls_cert_data=data(tls.client_cert),
        tls_key_data=data(tls.client_private_key),
        tls_ca_data=data(tls.server_root_ca_cert),
        tls_server_name=tls.server_name or None,
        tls_disabled=tls.disabled is True,
        tls_enabled=tls.disabled is False,
    )
