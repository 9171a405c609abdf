"""What every mailer example shares: the workflow input and its bounds, the scripted model's plan, and
the mail file each `send_email` appends to. Each example's worker puts this folder on sys.path."""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_TASK_QUEUE = "agents-example"
MAX_TURNS = 40  # pydantic-ai's default request limit is 50 model requests: turns + 1 stays under it
MAX_PACE_S = 5.0
MAX_TO = 120
DEFAULT_PACE_S = 0.3
DEFAULT_THINK_S = 0.2  # the scripted model's think time: a real model takes a while, so a kill can land in it
_ADDRESS = re.compile(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,55}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
log = logging.getLogger("agents_example")
_OPEN = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class MailInput:
    """A workflow's input, e.g. `{"turns": 10, "to": "ops@example.com", "pace": 0.3, "think": 0.2}`: the
    scripted model thinks `think` seconds, sends one email per turn, then answers; each send takes
    about `pace` seconds."""

    turns: int = 10
    to: str = "ops@example.com"
    pace: float = DEFAULT_PACE_S
    think: float = DEFAULT_THINK_S


def decode(decoder: Callable[[], object]) -> object:
    """A payload decoded by the SDK's converter, called by the workflow itself so that an input it
    cannot decode fails the workflow (a ValueError here), not its task (retried forever)."""
    try:
        return decoder()
    except Exception as err:  # RecursionError included: it is a RuntimeError
        raise ValueError(f"the input cannot be decoded: {type(err).__name__}") from None


def parse_input(raw: object) -> MailInput:
    """The input from its decoded JSON; a ValueError says why it cannot run. Refused, not clamped."""
    if raw is None:
        return MailInput()
    if not isinstance(raw, dict) or not set(raw) <= {"turns", "to", "pace", "think"}:
        raise ValueError('the input is a JSON object with "turns", "to", "pace" and/or "think", e.g. {"turns": 10}')
    turns, to, pace = raw.get("turns", 10), raw.get("to", MailInput.to), raw.get("pace", DEFAULT_PACE_S)
    think = raw.get("think", DEFAULT_THINK_S)
    if not isinstance(turns, int) or isinstance(turns, bool) or not 1 <= turns <= MAX_TURNS:
        raise ValueError(f"turns must be an integer 1..{MAX_TURNS}")
    if not isinstance(to, str) or len(to) > MAX_TO or not _ADDRESS.fullmatch(to):
        raise ValueError(f"to must be an address like ops@example.com (at most {MAX_TO} characters)")
    if not isinstance(pace, int | float) or isinstance(pace, bool) or not 0 <= pace <= MAX_PACE_S:
        raise ValueError(f"pace must be 0..{MAX_PACE_S:g} seconds")  # NaN and infinities too
    if not isinstance(think, int | float) or isinstance(think, bool) or not 0 <= think <= MAX_PACE_S:
        raise ValueError(f"think must be 0..{MAX_PACE_S:g} seconds")
    return MailInput(turns=turns, to=to, pace=float(pace), think=float(think))


def prompt(inp: MailInput) -> str:
    """The user prompt: the plan as JSON, which the scripted model reads back on every request."""
    return json.dumps({"turns": inp.turns, "to": inp.to, "pace": inp.pace, "think": inp.think})


@dataclass(frozen=True)
class Step:
    """What the scripted model does next: send `body` to `to` (a send taking `pace` s), or answer `text`."""

    to: str | None = None
    body: str | None = None
    pace: float = DEFAULT_PACE_S
    text: str | None = None
    think: float = DEFAULT_THINK_S  # how long the model takes to say it


def next_step(prompt_text: object, sent: int) -> Step:
    """The scripted model's decision from the conversation alone (its prompt and how many tool
    returns it has seen), so a model request re-run on a fresh worker answers the same."""
    plan = parse_input(decode(lambda: json.loads(prompt_text)) if isinstance(prompt_text, str) else None)
    if sent < plan.turns:
        return Step(to=plan.to, body=f"hello, this is turn {sent + 1}", pace=plan.pace, think=plan.think)
    return Step(text=f"sent {sent} emails to {plan.to}", think=plan.think)


def email_line(workflow_id: str, to: str, body: str) -> str:
    return f"{workflow_id} {to} {body}\n"


def check_email(workflow_id: str, to: object, body: object) -> tuple[str, str]:
    """A tool's arguments come from a model: refuse what would not make one clean line."""
    if not isinstance(to, str) or len(to) > MAX_TO or not _ADDRESS.fullmatch(to):
        raise ValueError("to must be a plain address")
    if not isinstance(body, str) or not 0 < len(body) <= 500 or not body.isprintable():
        raise ValueError("body must be 1-500 printable characters")
    if not workflow_id.isprintable():
        raise ValueError("the workflow id must be printable (it is written into the line)")
    return to, body


def out_dir(environ: dict[str, str]) -> Path:
    """`EXAMPLE_OUT_DIR`, else `$CHECKPOINT_HOME/example-out`, else `./example-out`."""
    explicit, home = environ.get("EXAMPLE_OUT_DIR"), environ.get("CHECKPOINT_HOME")
    if explicit:
        return Path(explicit).expanduser().absolute()
    return (Path(home).expanduser() if home else Path.cwd()).absolute() / "example-out"


def output_path(folder: Path, workflow_id: str) -> Path:
    """`<workflow_id>.txt` when the id is a plain file name; else a sanitized prefix, `+` and a hash
    (a plain name never holds `+`): no id names a path outside the folder or another id's file."""
    safe = _UNSAFE.sub("_", workflow_id)
    if safe == workflow_id and 0 < len(safe) <= 120 and not safe.startswith("."):
        return folder / f"{safe}.txt"
    digest = hashlib.sha256(workflow_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return folder / f"{safe.lstrip('.')[:80] or 'workflow'}+{digest}.txt"


def append_line(path: Path, line: str, only_if_absent: bool) -> bool:
    """Append `line` with one O_APPEND write, then fsync. With `only_if_absent`, look for it first
    under an exclusive lock: a redone (recovered) send never adds it twice. True if it appended."""
    data = line.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, _OPEN, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if only_if_absent:
            with os.fdopen(os.dup(fd), "rb") as fh:
                if any(existing == data for existing in fh):
                    return False
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)  # releases the lock
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)  # a new file's name survives a crash too
    finally:
        os.close(dir_fd)
    return True


async def send_paced(path: Path, line: str, pace: float, only_if_absent: bool) -> None:
    """The physical send: half the pace before the append, half after, so a kill can land on either
    side of it (both inside the tool's activity)."""
    await asyncio.sleep(pace / 2)
    await asyncio.to_thread(append_line, path, line, only_if_absent)
    await asyncio.sleep(pace / 2)


async def serve(name: str, plugin: object, workflows: list[type], activities: list[Callable[..., object]]) -> None:
    """Connect with the SDK's environment configuration and the framework's plugin, poll
    `CHECKPOINT_TASK_QUEUE` (default `agents-example`) with the SDK's default identity (pid@host),
    serve until SIGTERM or SIGINT."""
    from temporalio.client import Client
    from temporalio.envconfig import ClientConfig
    from temporalio.worker import Worker

    import checkpoint_tui.effects as effects

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    effects.ledger_target(), effects.probe_log_path()  # a missing location is one line now, not per tool call
    config = ClientConfig.load_client_connect_config()
    config.setdefault("target_host", DEFAULT_ADDRESS)
    client = await Client.connect(**config, plugins=[plugin])  # type: ignore[list-item]
    task_queue = os.environ.get("CHECKPOINT_TASK_QUEUE") or DEFAULT_TASK_QUEUE
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=workflows,
        activities=activities,
        # A killed worker's sticky queue holds the workflow's next task this long before Temporal
        # gives it to another worker (the SDK's default is 10 s: every kill would cost that much).
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
        graceful_shutdown_timeout=timedelta(seconds=1),
    )
    async with worker:
        log.info("%s polling %s on %s (pid %d)", name, task_queue, config["target_host"], os.getpid())
        await stop.wait()
    effects.close()
    log.info("stopped")


Activities = list[Callable[..., object]]


def main(name: str, plugin: Callable[[], object], workflows: list[type], activities: Activities) -> None:
    import checkpoint_tui.effects as effects

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        asyncio.run(serve(name, plugin(), workflows, activities))
    except effects.EffectsConfigError as err:
        sys.exit(f"{name}: {err}")


@functools.cache
def _activity_out_dir() -> Path:
    """Where the tools write: read once, by the worker process, when its first tool call runs (not at
    import: workflow code imports this module too)."""
    return out_dir(dict(os.environ))


async def send_email(to: object, body: object, pace: object, key: str | None = None) -> str:
    """Every example's `send_email` tool, in its activity: the line from the model's arguments (refused,
    non-retryable, if it cannot be one), then a plain append (`key` None: the blind tool) or, once per
    tool call, the append inside `exactly_once` keyed by the framework's call id (the guarded tool; its
    write appends only a line not already in the file: a `recovered` call redoes a write that may have
    been done)."""
    # Imported here, not at the top: workflow code imports this module, and the ledger's imports have
    # no place in the workflow sandbox.
    from temporalio import activity
    from temporalio.exceptions import ApplicationError

    from checkpoint_tui.effects import exactly_once

    workflow_id = activity.info().workflow_id or ""
    try:
        line = email_line(workflow_id, *check_email(workflow_id, to, body))
    except ValueError as err:
        raise ApplicationError(str(err), type="BadToolArgs", non_retryable=True) from None
    if not isinstance(pace, int | float) or isinstance(pace, bool) or not 0 <= pace <= MAX_PACE_S:
        raise ApplicationError(f"pace must be 0..{MAX_PACE_S:g} s", type="BadToolArgs", non_retryable=True)
    path = output_path(_activity_out_dir(), workflow_id)
    if key is None:
        await send_paced(path, line, float(pace), only_if_absent=False)
        return f"sent to {to}"

    async def write(payload: str) -> None:
        await send_paced(path, payload, float(pace), only_if_absent=True)

    return f"sent to {to} ({await exactly_once(kind='email', payload=line, write=write, key=key)})"
