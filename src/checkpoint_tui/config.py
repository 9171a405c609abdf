"""Frozen settings: where a home's files live and which Temporal it talks to."""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.connection import ConnectionOptions

DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True)
class Settings:
    home: Path
    temporal_address: str | None = None  # None: the home's embedded dev server
    namespace: str = DEFAULT_NAMESPACE
    model_url: str | None = None  # an OpenAI-compatible server; None: the offline provider
    model: str | None = None  # preferred model id (checked against /v1/models)
    connection: ConnectionOptions = ConnectionOptions()

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def db_path(self) -> Path:
        return self.run_dir / "checkpoint.db"

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
        return f"checkpoint-{self.home_id}"


def load_settings(
    home: str | Path | None = None,
    temporal_address: str | None = None,
    namespace: str | None = None,
    model_url: str | None = None,
    model: str | None = None,
    connection: ConnectionOptions | None = None,
) -> Settings:
    """Flags win over env vars, env vars over defaults (home = current directory)."""
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
    )
