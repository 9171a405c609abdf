"""How the lab reaches what it talks to, beyond an address: Temporal's TLS files and API key, a
PostgreSQL ledger's URL (whose password is never shown), a model server's URL (which must carry no
key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
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


# Inline TLS data (Temporal's environment configuration's `*_data`, or its TEMPORAL_TLS_*_DATA
# variables): how a child of the lab gets what the lab was given inline, never through a file of ours.
TLS_DATA_ENV = {
    "tls_cert_data": "TEMPORAL_TLS_CLIENT_CERT_DATA",
    "tls_key_data": "TEMPORAL_TLS_CLIENT_KEY_DATA",
    "tls_ca_data": "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
}
# The same for the lab's own children (a supervisor, our loop's workers): names no SDK or shell sets,
# so a process of ours reads inline data only when a parent lab passed it.
LAB_TLS_DATA_ENV = {attr: name.replace("TEMPORAL_", "CHECKPOINT_") for attr, name in TLS_DATA_ENV.items()}
LAB_TLS_ENV = "CHECKPOINT_TEMPORAL_TLS"  # the lab's TLS switch for its children: on, off (with_env_tls)


@dataclass(frozen=True)
class ConnectionOptions:
    """How to reach a Temporal cluster beyond its address: mTLS (files, or inline data from Temporal's
    environment configuration), the server name to verify, an API key."""

    tls_cert: str | None = None
    tls_key: str | None = None
    tls_ca: str | None = None
    api_key: str | None = field(default=None, repr=False)
    tls_cert_data: bytes | None = field(default=None, repr=False)
    tls_key_data: bytes | None = field(default=None, repr=False)
    tls_ca_data: bytes | None = field(default=None, repr=False)
    tls_server_name: str | None = None  # the name the server's certificate must hold (SNI too)
    tls_disabled: bool = False  # the configuration says no TLS, even beside an API key
    tls_enabled: bool = False  # the configuration says TLS, with the system's roots

    def worker_args(self) -> list[str]:
        """File paths and the server name only: an API key and inline data reach a worker through its
        environment (child_env)."""
        args: list[str] = []
        for flag, value in (
            ("--tls-cert", self.tls_cert),
            ("--tls-key", self.tls_key),
            ("--tls-ca", self.tls_ca),
            ("--tls-server-name", self.tls_server_name),
        ):
            if value:
                args += [flag, value]
        return args

    def secrets_env(self, names: Mapping[str, str] = TLS_DATA_ENV) -> dict[str, str]:
        """The inline TLS data as Temporal's variables (or `names`), for a child's environment (never its
        command line)."""
        return {name: getattr(self, attr).decode() for attr, name in names.items() if getattr(self, attr)}

    @property
    def _material(self) -> bool:
        """Certificates or a server name given: a TLS configuration of its own, not the system's defaults."""
        given = (self.tls_cert, self.tls_key, self.tls_ca, self.tls_cert_data, self.tls_key_data, self.tls_ca_data)
        return bool(any(given) or self.tls_server_name)

    @property
    def tls(self) -> bool:
        return not self.tls_disabled and (self._material or self.tls_enabled or bool(self.api_key))

    def client_kwargs(self) -> dict:
        """Keyword arguments for temporalio Client.connect."""
        from temporalio.service import TLSConfig  # the SDK is imported by callers that connect anyway

        kwargs: dict = {}
        if self.tls and not self._material:
            kwargs["tls"] = True  # the system's roots, the address's name
        elif self.tls:
            cert = self.tls_cert_data or _read(self.tls_cert, "--tls-cert")
            key = self.tls_key_data or _read(self.tls_key, "--tls-key")
            if bool(cert) != bool(key):
                raise UsageError("mTLS needs both --tls-cert and --tls-key (a client certificate and its key)")
            kwargs["tls"] = TLSConfig(
                client_cert=cert,
                client_private_key=key,
                server_root_ca_cert=self.tls_ca_data or _read(self.tls_ca, "--tls-ca"),
                domain=self.tls_server_name,
            )
        elif self.tls_disabled:
            kwargs["tls"] = False
        if self.api_key:
            kwargs["api_key"] = self.api_key
        return kwargs


def merged(over: ConnectionOptions, under: ConnectionOptions) -> ConnectionOptions:
    """Each of `over`'s settings where it has one, else `under`'s (flags over a configuration)."""
    picked = {
        name: getattr(over, name) if getattr(over, name) not in (None, False) else getattr(under, name)
        for name in ConnectionOptions.__dataclass_fields__
    }
    return ConnectionOptions(**picked)


def with_env_tls(conn: ConnectionOptions, environ: Mapping[str, str]) -> ConnectionOptions:
    """`conn` with the inline TLS data a parent lab passed (LAB_TLS_DATA_ENV), each where it has none, and
    its TLS switch (LAB_TLS_ENV): a profile's `tls = false` beside an API key, or TLS with no files."""
    extra: dict[str, object] = {
        attr: environ[name].encode() for attr, name in LAB_TLS_DATA_ENV.items() if environ.get(name)
    }
    extra = {attr: data for attr, data in extra.items() if getattr(conn, attr) is None}
    switch = environ.get(LAB_TLS_ENV)
    if switch in ("on", "off") and not (conn.tls_disabled or conn.tls_enabled):
        extra["tls_enabled" if switch == "on" else "tls_disabled"] = True
    return replace(conn, **extra) if extra else conn  # type: ignore[arg-type]


def tls_switch_env(conn: ConnectionOptions) -> dict[str, str]:
    """The TLS switch for a child of the lab (with_env_tls reads it back): said only when the
    configuration said it, else the child derives it as the lab did (files, an API key)."""
    return {LAB_TLS_ENV: "off"} if conn.tls_disabled else {LAB_TLS_ENV: "on"} if conn.tls_enabled else {}


def _read(path: str | None, flag: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).expanduser().read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read {flag} {path}: {err.strerror or err}") from None
