"""Frozen settings: where a home's files live and which Temporal it talks to."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from checkpoint_tui.connection import ConnectionOptions
from checkpoint_tui.errors import UserFacingError
from checkpoint_tui.ledger.backend import is_postgres_url

DEFAULT_NAMESPACE = "default"
LEDGER_URL_ENV = "CHECKPOINT_LEDGER_URL"


@dataclass(frozen=True)
class Settings:
    home: Path
    temporal_address: str | None = None  # None: the home's embedded dev server
    namespace: str = DEFAULT_NAMESPACE
    model_url: str | None = None  # an OpenAI-compatible server; None: the offline provider
    model: str | None = None  # preferred model id (checked against /v1/models)
    connection: ConnectionOptions = ConnectionOptions()
    ledger_url: str | None = None  # postgresql://...: a ledger shared by several hosts; None: SQLite in run/
    artifacts_root: Path | None = None  # a path all hosts share; None: HOME/artifacts
    task_queue_name: str | None = None  # None: derived (see task_queue)
    workers: int = 1  # local workers the supervisor keeps polling

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def artifacts_dir(self) -> Path:
        return self.artifacts_root or self.home / "artifacts"

    @property
    def db_path(self) -> Path:
        return self.run_dir / "checkpoint.db"

    @property
    def ledger(self) -> str | Path:
        """What ledger.store.connect opens: the shared PostgreSQL URL, else this home's SQLite file."""
        return self.ledger_url or self.db_path

    @property
    def ledger_label(self) -> str:
        """The ledger for messages and the status bar: never the URL's password."""
        if self.ledger_url:
            parts = urlsplit(self.ledger_url)
            return f"postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"
        return str(self.db_path)

    def child_env(self) -> dict[str, str]:
        """The environment for a process of ours (worker, supervisor): the ledger URL travels here, never
        on a command line, since it may carry a password."""
        env = dict(os.environ)
        env.pop(LEDGER_URL_ENV, None)
        if self.ledger_url:
            env[LEDGER_URL_ENV] = self.ledger_url
        return env

    @property
    def embedded(self) -> bool:
        return self.temporal_address is None

    def ensure_dirs(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)

    @property
    def home_id(self) -> str:
        """A stable random id per home; it names the task queue so two homes never share tasks."""
        path = self.run_dir / "home_id"
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            self.ensure_dirs()
            value = secrets.token_hex(4)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(value)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # first writer wins if two processes race
            tmp.unlink(missing_ok=True)
            return path.read_text().strip()

    @property
    def task_queue(self) -> str:
        """Per home by default, so two homes never share tasks; hosts sharing a PostgreSQL ledger share a
        queue by default (named after the database, not its password), so their pools serve the same runs."""
        if self.task_queue_name:
            return self.task_queue_name
        if self.ledger_url:  # the label: the same database whatever user, password or default port spelling
            return f"checkpoint-pg-{hashlib.sha256(self.ledger_label.encode()).hexdigest()[:8]}"
        return f"checkpoint-{self.home_id}"


def load_settings(
    home: str | Path | None = None,
    temporal_address: str | None = None,
    namespace: str | None = None,
    model_url: str | None = None,
    model: str | None = None,
    connection: ConnectionOptions | None = None,
    ledger_url: str | None = None,
    artifacts: str | Path | None = None,
    task_queue: str | None = None,
    workers: int = 1,
) -> Settings:
    """Flags win over env vars, env vars over defaults (home = current directory)."""
    ledger_url = ledger_url or os.environ.get(LEDGER_URL_ENV) or None
    if ledger_url and not is_postgres_url(ledger_url):
        raise UserFacingError(
            f"--ledger takes a postgresql:// URL (got {ledger_url.split(':', 1)[0]}:...); "
            "without it the ledger is SQLite under run/"
        )
    artifacts = artifacts or os.environ.get("CHECKPOINT_ARTIFACTS") or None
    home_path = Path(home or os.environ.get("CHECKPOINT_HOME") or Path.cwd()).expanduser().resolve()
    address = temporal_address or os.environ.get("CHECKPOINT_TEMPORAL_ADDRESS") or None
    ns = namespace or os.environ.get("CHECKPOINT_NAMESPACE") or DEFAULT_NAMESPACE
    return Settings(
        home=home_path,
        temporal_address=address,
        namespace=ns,
        model_url=model_url or os.environ.get("CHECKPOINT_MODEL_URL") or None,
        model=model or os.environ.get("CHECKPOINT_MODEL") or None,
        connection=connection or ConnectionOptions(),
        ledger_url=ledger_url,
        artifacts_root=Path(artifacts).expanduser().resolve() if artifacts else None,
        task_queue_name=task_queue or os.environ.get("CHECKPOINT_TASK_QUEUE") or None,
        workers=workers,
    )
