"""Frozen settings: where a home's files live, which Temporal, ledger and model it talks to.

The environment is read here (in `load_settings`) and in the CLI, nowhere else: every other module
gets what it needs from a `Settings`, and child processes get it back through `child_env()`.
Secrets (a ledger URL's password, API keys) are fields with repr=False and travel only in memory and
in a child's environment, never on a command line.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.files.home import check_private_dir, check_private_file, resolve_home  # noqa: F401 (re-exported)
from checkpoint_tui.settings.codec import AUTH_ENV as CODEC_AUTH
from checkpoint_tui.settings.codec import CodecServer
from checkpoint_tui.settings.connection import (  # noqa: F401 (re-exported: where callers have always found them)
    LAB_TLS_DATA_ENV,
    LAB_TLS_ENV,
    POSTGRES_SCHEMES,
    ConnectionOptions,
    check_model_url,
    is_postgres_url,
    postgres_label,
    postgres_parts,
    tls_switch_env,
    with_env_tls,
)

DEFAULT_NAMESPACE = "default"
LEDGER_URL_ENV = "CHECKPOINT_LEDGER_URL"
PROBE_LOG_ENV = "CHECKPOINT_PROBE_LOG"  # the effects library's probe log (default HOME/run/)
PROBE_LOG_NAME = "effects-probe.jsonl"  # its file name under HOME/run/, where the lab's audit reads it
TEMPORAL_API_KEY_ENV = "TEMPORAL_API_KEY"
# Temporal's environment configuration (settings/temporal_config.py), besides the API key: what a child
# of the lab must not read from the caller (a profile, a file, a shell's TLS variables).
TEMPORAL_CONFIG_VARS = (
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
    "TEMPORAL_TLS",
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_CERT_DATA",
    "TEMPORAL_TLS_CLIENT_KEY_DATA",
    "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
    "TEMPORAL_TLS_SERVER_NAME",
    "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION",
)
MODEL_API_KEY_ENVS = ("CHECKPOINT_API_KEY", "OPENAI_API_KEY")
DEFAULT_MODEL_TIMEOUT_S = 30.0

# Which host ran a step, shown in the panes; CHECKPOINT_HOST names a pool when hostnames are not unique.
BEAT_EVERY_S = 0.25  # how often a worker's event loop touches its beat file
HOST = os.environ.get("CHECKPOINT_HOST") or socket.gethostname()


@dataclass(frozen=True)
class ModelOptions:
    """The model server a worker asks. The key goes only to this URL, the one the worker was started
    with; a URL named in workflow input is never sent it."""

    url: str | None = None  # an OpenAI-compatible server; None: the offline provider
    model: str | None = None  # preferred model id (checked against /v1/models)
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_MODEL_TIMEOUT_S  # one call, connect to last byte
    price_table: str | None = None  # JSON overrides of model/prices.py's table


@dataclass(frozen=True)
class FleetMember:
    """One worker command of a fleet and the task queue it polls (its CHECKPOINT_TASK_QUEUE)."""

    queue: str
    cmd: tuple[str, ...]
    # Worker Versioning (--deployment): the build id this command runs as in the Worker Deployment
    build_id: str | None = None


def build_id(cmd: tuple[str, ...], n: int) -> str:
    """A Worker Deployment Version's build id: v1 (a --worker command) or v2 (its --deploy command) and a
    digest of the command, so a changed command is a new version, never an old one's name on new code."""
    return f"v{n}-{hashlib.sha256(chr(0).join(cmd).encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Settings:
    home: Path
    temporal_address: str | None = None  # None: the home's embedded dev server
    namespace: str = DEFAULT_NAMESPACE
    models: ModelOptions = ModelOptions()
    connection: ConnectionOptions = ConnectionOptions()
    ledger_url: str | None = field(default=None, repr=False)  # a shared PostgreSQL ledger; None: SQLite
    artifacts_root: Path | None = None  # a path all hosts share; None: HOME/artifacts
    task_queue_name: str | None = None  # None: derived (see task_queue)
    pool_size: int = 1  # local workers the supervisor keeps polling
    spare: bool = True  # a warm spare beside the pool (ours: a standby worker; a user's: a preloader)
    temporal_bin: str | None = None  # the `temporal` CLI to start the dev server with; None: the venv's
    # fsync an effect's file (and its folder) before the ledger stamps it; off only to measure its cost
    fsync_effects: bool = True
    # where workers reach Temporal when not at the app's address: chaos's network proxy (a partition nemesis)
    worker_address: str | None = None
    # the workers' leg to worker_address is plain: chaos's hop ends TLS there and speaks it upstream (hop.py)
    worker_plaintext: bool = False
    # --worker-cmd: a user's own worker command (argv, argv[0] resolved) run instead of ours, from worker_cwd
    worker_cmd: tuple[str, ...] = ()
    worker_cwd: Path | None = None
    fleet: tuple[FleetMember, ...] = ()  # --worker QUEUE=CMD beyond the first command (ops/fleet.py)
    deploys: tuple[FleetMember, ...] = ()  # --deploy QUEUE=CMD: the new version a deploy nemesis swaps in
    dependencies: tuple[tuple[str, str], ...] = ()  # --dependency NAME=HOST:PORT, as the workers' env gets it
    model_endpoints: tuple[tuple[str, str], ...] = ()  # --model-endpoint NAME=URL, as the workers' env gets it
    deployment: str | None = None  # --deployment NAME: a --deploy queue's workers as Worker Deployment Versions
    data_converter: str | None = None  # --data-converter MODULE:ATTR: the team's, in a process of its own
    codec: CodecServer | None = None  # a team's codec server (TEMPORAL_CODEC_ENDPOINT; its auth repr=False)

    @property
    def members(self) -> tuple[FleetMember, ...]:
        """The fleet's worker commands: the first (--worker-cmd, or the first --worker) on the workflow's
        task queue, then the others; none for our own worker. With --deployment, a command whose queue
        has a --deploy runs as version 1 of the Worker Deployment."""
        found = ((FleetMember(self.task_queue, self.worker_cmd),) if self.worker_cmd else ()) + self.fleet
        versioned = {d.queue for d in self.versions}
        return tuple(replace(m, build_id=build_id(m.cmd, 1)) if m.queue in versioned else m for m in found)

    @property
    def versions(self) -> tuple[FleetMember, ...]:
        """With --deployment, each --deploy command as version 2 of the Worker Deployment: its workers run
        beside version 1's (blue-green), not instead of them; none without (a rolling deploy)."""
        return tuple(replace(d, build_id=build_id(d.cmd, 2)) for d in self.deploys) if self.deployment else ()

    @property
    def user_worker(self) -> bool:
        """The workers are a user's own command (--worker-cmd), not checkpoint_tui.worker."""
        return bool(self.worker_cmd)

    @property
    def model_url(self) -> str | None:
        return self.models.url

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    def verify_home(self, address: str) -> Settings:
        """run/verify: its own ledger (or the shared one), artifacts and task queue, so --verify never disturbs
        this home's runs; a user's worker command keeps the queue it was given (it may poll no other)."""
        queue = self.task_queue_name if self.user_worker else None
        return Settings(
            home=self.run_dir / "verify",
            temporal_address=address,
            namespace=self.namespace,
            connection=self.connection,
            ledger_url=self.ledger_url,
            temporal_bin=self.temporal_bin,
            task_queue_name=queue,
            worker_cmd=self.worker_cmd,
            worker_cwd=self.worker_cwd,
            fleet=self.fleet,
            deploys=self.deploys,
            deployment=self.deployment,
            data_converter=self.data_converter,
            codec=self.codec,
            dependencies=self.dependencies,
            model_endpoints=self.model_endpoints,
        )

    @property
    def probe_log(self) -> Path:
        """The effects library's probe log of this home's workers: one JSON line per physical write,
        read back by the audit (a user's worker is pointed at it through its environment)."""
        return self.run_dir / PROBE_LOG_NAME

    def beat_file(self, pid: int) -> Path:
        """A worker's liveness beat (loop_worker/liveness.py writes it, ops/watchdog.py reads it)."""
        return self.run_dir / f"beat-{pid}"

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
    def ledger_exists(self) -> bool:
        """False only for a home whose SQLite ledger was never created (nothing to read yet)."""
        return bool(self.ledger_url) or self.db_path.exists()

    @property
    def ledger_label(self) -> str:
        """The ledger for messages and the status bar: never a user or a password."""
        return postgres_label(self.ledger_url) if self.ledger_url else str(self.db_path)

    def child_env(self) -> dict[str, str]:
        """The environment for a process of ours (worker, supervisor, naive loop): secrets and shared
        paths travel here, never on a command line."""
        env = dict(os.environ)
        for name in (LEDGER_URL_ENV, TEMPORAL_API_KEY_ENV, "CHECKPOINT_ARTIFACTS", "CHECKPOINT_TASK_QUEUE", CODEC_AUTH):
            env.pop(name, None)  # a codec server's auth is the lab's own: no child of it calls that server
        if self.ledger_url:
            env[LEDGER_URL_ENV] = self.ledger_url
        if self.connection.api_key:
            env[TEMPORAL_API_KEY_ENV] = self.connection.api_key
        if self.artifacts_root:
            env["CHECKPOINT_ARTIFACTS"] = str(self.artifacts_root)
        if self.task_queue_name:
            env["CHECKPOINT_TASK_QUEUE"] = self.task_queue_name
        if self.temporal_bin:
            env["CHECKPOINT_TEMPORAL_BIN"] = self.temporal_bin
        for name in TEMPORAL_CONFIG_VARS:  # a child reads the lab's one answer, not the caller's file or shell
            env.pop(name, None)
        for name in (*LAB_TLS_DATA_ENV.values(), LAB_TLS_ENV):
            env.pop(name, None)
        if not self.embedded:  # inline TLS data: never a command line, never a file; the TLS switch beside it
            env.update({**self.connection.secrets_env(LAB_TLS_DATA_ENV), **tls_switch_env(self.connection)})
        env.pop("CHECKPOINT_WORKER_ADDRESS", None)
        env.pop("CHECKPOINT_WORKER_PLAINTEXT", None)
        if self.worker_address:
            env["CHECKPOINT_WORKER_ADDRESS"] = self.worker_address
            if self.worker_plaintext:
                env["CHECKPOINT_WORKER_PLAINTEXT"] = "1"
        # The model server a worker trusts with the model key is the one it was started with.
        model_env = (
            ("CHECKPOINT_MODEL_URL", self.models.url),
            ("CHECKPOINT_MODEL", self.models.model),
            ("CHECKPOINT_MODEL_TIMEOUT", f"{self.models.timeout_s:g}"),
        )
        for name, value in model_env:
            env.pop(name, None)
            if value:
                env[name] = value
        return env

    @property
    def embedded(self) -> bool:
        return self.temporal_address is None

    def server_flags(self) -> list[str]:
        """The global flags that point a process of ours (a supervisor, a proof tool) at this lab's
        Temporal: a server the lab did not start by its address, namespace and TLS files (an API key
        travels in the environment); the embedded dev server is found under the home, its namespace said."""
        if self.embedded:
            return [] if self.namespace == DEFAULT_NAMESPACE else ["--namespace", self.namespace]
        address = self.temporal_address or ""
        return ["--temporal-address", address, "--namespace", self.namespace, *self.connection.worker_args()]

    def ensure_dirs(self) -> None:
        """run/ is private (0700: it holds the ledger, process records and logs) and must be ours."""
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        check_private_dir(self.run_dir)
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)
        if self.artifacts_root is None:  # ours under the home: a real folder (never a planted link)
            check_private_dir(self.artifacts_dir, private=False)

    @property
    def home_id(self) -> str:
        """A stable random id per home; it names the task queue so two homes never share tasks."""
        path = self.run_dir / "home_id"
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            self.ensure_dirs()
            tmp = path.with_name(f".home_id.{os.getpid()}-{secrets.token_hex(4)}")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(4))
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)  # first writer wins if two processes race
            tmp.unlink(missing_ok=True)
            return path.read_text().strip()

    @property
    def task_queue(self) -> str:
        """Per home by default, so two homes never share tasks. With a shared PostgreSQL ledger the CLI
        names the queue after the ledger's own id (ledger.store.with_shared_queue); the label-derived
        name here is only the default for code that builds Settings by hand."""
        if self.task_queue_name:
            return self.task_queue_name
        if self.ledger_url:  # the label: the same database whatever user, password or default port spelling
            return f"checkpoint-pg-{hashlib.sha256(self.ledger_label.encode()).hexdigest()[:8]}"
        return f"checkpoint-{self.home_id}"


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


TUI_STOCK_ENV = "CHECKPOINT_TUI_STOCK"


def tui_stock_env() -> str:
    """CHECKPOINT_TUI_STOCK: which of the TUI's paint and driver tricks run on Textual's stock paths
    instead (`1` or `all`: every one; else a comma-separated list of names). Parsed by tui/render/."""
    return _env(TUI_STOCK_ENV) or ""


@dataclass(frozen=True)
class EffectsEnv:
    """What the effects library (`checkpoint_tui.effects`) reads in a user's worker: the environment
    the lab sets for a worker it supervises (or a user sets by hand)."""

    ledger_url: str | None = field(default=None, repr=False)  # CHECKPOINT_LEDGER_URL: a PostgreSQL ledger
    home: Path | None = None  # CHECKPOINT_HOME: the lab home (its SQLite ledger, its run/ folder)
    probe_log: Path | None = None  # CHECKPOINT_PROBE_LOG: where the physical writes are counted


def effects_env() -> EffectsEnv:
    home, probe = _env("CHECKPOINT_HOME"), _env(PROBE_LOG_ENV)
    return EffectsEnv(
        ledger_url=_env(LEDGER_URL_ENV),
        home=Path(home).expanduser().resolve() if home else None,
        probe_log=Path(probe).expanduser().absolute() if probe else None,
    )


def _model_timeout() -> float:
    raw = _env("CHECKPOINT_MODEL_TIMEOUT")
    if raw is None:
        return DEFAULT_MODEL_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise UsageError(f"CHECKPOINT_MODEL_TIMEOUT={raw!r} is not a number of seconds") from None
    if not 0 < value <= 600:
        raise UsageError(f"CHECKPOINT_MODEL_TIMEOUT={raw} must be between 0 and 600 seconds")
    return value


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
    pool_size: int = 1,
) -> Settings:
    """Flags win over env vars, env vars over defaults (home = current directory)."""
    ledger_url = ledger_url or _env(LEDGER_URL_ENV)
    if ledger_url and not is_postgres_url(ledger_url):
        raise UsageError(
            f"--ledger takes a postgresql:// URL (got {ledger_url.split(':', 1)[0][:20]}:...); "
            "without it the ledger is SQLite under run/"
        )
    if ledger_url:
        postgres_parts(ledger_url)  # a URL libpq cannot read is a usage error now, not a traceback later
    model_url = model_url or _env("CHECKPOINT_MODEL_URL")
    if model_url:
        check_model_url(model_url)
    artifacts = artifacts or _env("CHECKPOINT_ARTIFACTS")
    source = "--home" if home else "CHECKPOINT_HOME" if _env("CHECKPOINT_HOME") else "the current directory (the home)"
    home_path = resolve_home(home or _env("CHECKPOINT_HOME") or Path.cwd(), source)
    connection = connection or ConnectionOptions()
    if connection.api_key is None and _env(TEMPORAL_API_KEY_ENV):
        connection = replace(connection, api_key=_env(TEMPORAL_API_KEY_ENV))
    temporal_address = temporal_address or _env("CHECKPOINT_TEMPORAL_ADDRESS")
    if temporal_address:  # a server the lab did not start: the inline TLS data and name a parent lab passed
        connection = with_env_tls(connection, os.environ)
    models = ModelOptions(
        url=model_url,
        model=model or _env("CHECKPOINT_MODEL"),
        api_key=next((k for k in map(_env, MODEL_API_KEY_ENVS) if k), None),
        timeout_s=_model_timeout(),
        price_table=_env("CHECKPOINT_PRICE_TABLE"),
    )
    return Settings(
        home=home_path,
        temporal_address=temporal_address,
        namespace=namespace or _env("CHECKPOINT_NAMESPACE") or DEFAULT_NAMESPACE,
        models=models,
        connection=connection,
        ledger_url=ledger_url,
        artifacts_root=Path(artifacts).expanduser().resolve() if artifacts else None,
        task_queue_name=task_queue or _env("CHECKPOINT_TASK_QUEUE"),
        pool_size=pool_size,
        temporal_bin=_env("CHECKPOINT_TEMPORAL_BIN"),
        fsync_effects=_env("CHECKPOINT_FSYNC") != "0",
        worker_address=_env("CHECKPOINT_WORKER_ADDRESS"),
        worker_plaintext=_env("CHECKPOINT_WORKER_PLAINTEXT") == "1",
    )
