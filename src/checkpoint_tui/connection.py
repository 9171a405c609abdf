"""How to connect to Temporal: the address, namespace, mTLS files and API key, shared by the app
process and the worker process. The API key travels only in memory and in the child's environment
(TEMPORAL_API_KEY), never in a command line, a file, SQLite or history."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from temporalio.service import TLSConfig

from checkpoint_tui.errors import UserFacingError

API_KEY_ENV = "TEMPORAL_API_KEY"


@dataclass(frozen=True)
class ConnectionOptions:
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None

    def worker_args(self) -> list[str]:
        args: list[str] = []
        for flag, value in (("--tls-cert", self.tls_cert), ("--tls-key", self.tls_key), ("--tls-ca", self.tls_ca)):
            if value:
                args += [flag, value]
        return args

    def client_kwargs(self) -> dict:
        """Keyword arguments for temporalio Client.connect."""
        kwargs: dict = {}
        if self.tls_cert or self.tls_key or self.tls_ca:
            if bool(self.tls_cert) != bool(self.tls_key):
                raise UserFacingError("mTLS needs both --tls-cert and --tls-key")
            kwargs["tls"] = TLSConfig(
                client_cert=_read(self.tls_cert, "--tls-cert"),
                client_private_key=_read(self.tls_key, "--tls-key"),
                server_root_ca_cert=_read(self.tls_ca, "--tls-ca"),
            )
        key = os.environ.get(API_KEY_ENV)
        if key:
            kwargs["api_key"] = key
            kwargs.setdefault("tls", True)  # API keys are only sent over TLS
        return kwargs


def _read(path: str | None, flag: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as err:
        raise UserFacingError(f"cannot read {flag} {path}: {err.strerror or err}") from None
