"""A team's codec server (Temporal's remote codec protocol: POST /encode and /decode), as the `temporal`
CLI and the Web UI take it: `TEMPORAL_CODEC_ENDPOINT` (or `--codec-endpoint URL`) and
`TEMPORAL_CODEC_AUTH`, the Authorization header's value, from the environment only (it is a secret:
never on a command line, in a report or a log)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from checkpoint_tui.errors import UsageError

ENDPOINT_ENV, AUTH_ENV = "TEMPORAL_CODEC_ENDPOINT", "TEMPORAL_CODEC_AUTH"
MAX_URL = 2048
MAX_AUTH = 8192


@dataclass(frozen=True)
class CodecServer:
    url: str  # the endpoint: /encode and /decode are under it
    auth: str | None = field(default=None, repr=False)  # the Authorization header, as given

    @property
    def label(self) -> str:
        """The endpoint as shown: scheme, host, port and path, never a user or password in it."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"


def check_endpoint(url: str, where: str = "--codec-endpoint") -> str:
    """An http(s) URL with a host, one bounded line; the endpoint itself, without a trailing slash."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        parts, port_ok = None, False
    if len(url) > MAX_URL or not url.isprintable() or parts is None or not port_ok:
        raise UsageError(f"{where}: not a URL (http:// or https://, one line, at most {MAX_URL} characters)")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UsageError(f"{where}: an http:// or https:// endpoint with a host and no query (got {parts.scheme}://…)")
    if parts.username is not None or parts.password is not None:  # said nowhere: not in a URL the lab shows
        raise UsageError(f"{where}: no user or password in the URL (its credential goes in {AUTH_ENV})")
    return url.rstrip("/")


def codec_server(flag: str | None, environ: Mapping[str, str]) -> CodecServer | None:
    """The flag's endpoint, else the environment's; its auth from the environment only."""
    url = flag or environ.get(ENDPOINT_ENV) or None
    if url is None:
        return None
    url = check_endpoint(url, "--codec-endpoint" if flag else ENDPOINT_ENV)
    auth = environ.get(AUTH_ENV) or None
    if auth is not None and (len(auth) > MAX_AUTH or not auth.isprintable()):
        raise UsageError(f"{AUTH_ENV}: one printable line of at most {MAX_AUTH} characters")
    return CodecServer(url, auth)
