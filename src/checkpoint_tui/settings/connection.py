"""How the lab reaches what it talks to, beyond an address: Temporal's TLS files and API key, a
PostgreSQL ledger's URL (whose password is never shown), a model server's URL (which must carry no
key)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from checkpoint_tui.errors import UsageError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: str | Path) -> bool:
    return isinstance(target, str) and target.startswith(POSTGRES_SCHEMES)


def postgres_parts(url: str) -> dict[str, Any]:
    """The URL as libpq reads it (psycopg's own parser: multi-host lists, ?host=, ?port=, escapes).
    A URL it cannot parse is a usage error that does not repeat the URL (it may hold a password)."""
    from psycopg import conninfo  # only a shared-ledger user needs psycopg loaded

    try:
        return conninfo.conninfo_to_dict(url)
    except Exception:  # psycopg.ProgrammingError and friends; their text may quote the URL
        raise UsageError(
            "the PostgreSQL ledger URL cannot be parsed (check its %-escapes, port and query); "
            "it is not shown here since it may hold a password"
        ) from None


def postgres_label(url: str) -> str:
    """postgresql://host:port/db with every host of a multi-host URL, never a user or password."""
    parts = postgres_parts(url)
    hosts = (parts.get("host") or parts.get("hostaddr") or "localhost").split(",")
    ports = [p or "5432" for p in (parts.get("port") or "").split(",")]  # an empty entry: the default
    if len(ports) == 1:
        ports *= len(hosts)  # libpq: one port applies to every host
    where = ",".join(f"{h}:{p}" for h, p in zip(hosts, ports, strict=False))
    return f"postgresql://{where}/{parts.get('dbname') or parts.get('user') or ''}"


def check_model_url(url: str) -> None:
    """A model URL is shown (provider label, step rows) and travels in workflow input: keys and
    passwords must not ride in it."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--model-url takes http(s)://HOST[:PORT][/v1], not {url[:60]!r}")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise UsageError(
            "--model-url must not carry credentials or a query; put the key in CHECKPOINT_API_KEY or OPENAI_API_KEY"
        )


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach a Temporal cluster beyond its address: mTLS files and an API key."""

    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    api_key: str | None = field(default=None, repr=False)

    def worker_args(self) -> list[str]:
        """File paths only: the API key reaches a worker through its environment."""
        args: list[str] = []
        for flag, value in (("--tls-cert", self.tls_cert), ("--tls-key", self.tls_key), ("--tls-ca", self.tls_ca)):
            if value:
                args += [flag, value]
        return args

    def client_kwargs(self) -> dict:
        """Keyword arguments for temporalio Client.connect."""
        from temporalio.service import TLSConfig  # the SDK is imported by callers that connect anyway

        kwargs: dict = {}
        if self.tls_cert or self.tls_key or self.tls_ca:
            if bool(self.tls_cert) != bool(self.tls_key):
                raise UsageError("mTLS needs both --tls-cert and --tls-key")
            kwargs["tls"] = TLSConfig(
                client_cert=_read(self.tls_cert, "--tls-cert"),
                client_private_key=_read(self.tls_key, "--tls-key"),
                server_root_ca_cert=_read(self.tls_ca, "--tls-ca"),
            )
        if self.api_key:
            kwargs["api_key"] = self.api_key
            kwargs.setdefault("tls", True)  # API keys are only sent over TLS
        return kwargs


def _read(path: str | None, flag: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read {flag} {path}: {err.strerror or err}") from None
