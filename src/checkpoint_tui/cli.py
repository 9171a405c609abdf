"""Command line: the TUI by default; `start`, `status`, `stop` and `--verify` run headless and never
import Textual."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from enum import IntEnum
from pathlib import Path

from checkpoint_tui.config import LEDGER_URL_ENV, Settings, load_settings
from checkpoint_tui.connection import API_KEY_ENV, ConnectionOptions
from checkpoint_tui.errors import UserFacingError
from checkpoint_tui.ledger.backend import is_postgres_url
from checkpoint_tui.ledger.faults import FaultSpec, parse_fault


class Exit(IntEnum):
    OK = 0
    FAILED = 1  # a run or a verify check failed
    USAGE = 2  # bad flags
    UNAVAILABLE = 3  # Temporal (or its binary) cannot be reached


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not a usage dump
        self.exit(Exit.USAGE, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="checkpoint-tui",
        description="A terminal chaos lab for durable AI-agent execution (Temporal + an exactly-once ledger).",
    )
    p.add_argument("--home", help="directory holding run/ and artifacts/ (env CHECKPOINT_HOME; default: cwd)")
    p.add_argument(
        "--temporal-address",
        metavar="HOST:PORT",
        help="use this Temporal server and start none (env CHECKPOINT_TEMPORAL_ADDRESS)",
    )
    p.add_argument("--namespace", help="Temporal namespace (env CHECKPOINT_NAMESPACE; default: default)")
    p.add_argument("--tls-cert", metavar="PEM", help="client certificate for mTLS to a Temporal cluster")
    p.add_argument("--tls-key", metavar="PEM", help="client private key for mTLS")
    p.add_argument("--tls-ca", metavar="PEM", help="CA certificate to verify the server (default: system roots)")
    p.add_argument(
        "--temporal-api-key",
        metavar="KEY",
        help="API key (prefer env TEMPORAL_API_KEY: a flag is visible in the process list); implies TLS",
    )
    p.add_argument(
        "--ledger",
        metavar="URL",
        type=_ledger_url,
        help="postgresql://... ledger shared by several hosts (env CHECKPOINT_LEDGER_URL; default: SQLite in run/)",
    )
    p.add_argument(
        "--artifacts",
        metavar="DIR",
        help="artifacts root all hosts share (env CHECKPOINT_ARTIFACTS; default: artifacts/)",
    )
    p.add_argument(
        "--task-queue",
        metavar="NAME",
        help="Temporal task queue (env CHECKPOINT_TASK_QUEUE; default: one per home, or one per shared ledger)",
    )
    p.add_argument(
        "--workers", type=_positive_int, default=1, metavar="N", help="local workers the supervisor keeps polling"
    )
    p.add_argument(
        "--model-url",
        metavar="URL",
        help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080 (env CHECKPOINT_MODEL_URL; "
        "key from CHECKPOINT_API_KEY or OPENAI_API_KEY); default: the offline provider",
    )
    p.add_argument("--model", help="preferred model id, checked against /v1/models (env CHECKPOINT_MODEL)")
    p.add_argument(
        "--refresh", type=_positive_float, default=0.5, metavar="S",
        help="seconds between the app's refreshes (default 0.5; 1.0 costs less CPU while a run is live)",
    )  # fmt: skip
    p.add_argument("--verify", action="store_true", help="run the headless kill/retry/restart proof and exit")
    p.add_argument("--json", dest="json_path", metavar="PATH", help="with --verify: also write the results here")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    start = sub.add_parser("start", help="start a run (headless); prints its run id")
    start.add_argument("--steps", type=_positive_int, default=30)
    start.add_argument("--pace", type=_non_negative_float, default=1.0, help="timer/think-time scale (0 = none)")
    start.add_argument("--wait", action="store_true", help="supervise and show progress until the run ends")
    start.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        type=_fault_spec,
        help="transient:STEP[:COUNT] | garble:STEP | crash_after_claim:STEP[:file|db|email] | kill_at:STEP",
    )

    status = sub.add_parser("status", help="summary of a run from SQLite + Temporal")
    status.add_argument("run", nargs="?", help="run id (default: the latest)")
    status.add_argument("--json", action="store_true", dest="as_json", help="machine-readable output")

    sub.add_parser("stop", help="stop the worker, the dev server and the model server this home started")
    sub.add_parser("supervise", help="run a headless supervisor for this home until SIGTERM")
    sub.add_parser(
        "worker",
        help="run a pool of --workers N on this host against a shared cluster and ledger until SIGTERM",
    )
    chaos = sub.add_parser("chaos", help="a seeded schedule of SIGKILLs of every process, then Jepsen-style counts")
    chaos.add_argument("--seed", type=int, default=1)
    chaos.add_argument("--steps", type=_positive_int, default=30)
    chaos.add_argument("--kills", type=_positive_int, default=8)
    chaos.add_argument("--json", dest="chaos_json", metavar="PATH", help="write the report here")
    compare = sub.add_parser("compare", help="naive loop vs durable loop under the same SIGKILL")
    compare.add_argument("--steps", type=_positive_int, default=6)
    compare.add_argument("--kill-at", type=_positive_int, default=3, help="kill right after this step's email")
    sub.add_parser("model-server", help="start (or find) the opt-in local llama.cpp model server; prints its URL")
    return p


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def _positive_float(text: str) -> float:
    value = _non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return value


def _ledger_url(text: str) -> str:
    if not is_postgres_url(text):
        raise argparse.ArgumentTypeError(f"takes a postgresql:// URL, not {text.split(':', 1)[0]}:...")
    return text


def _fault_spec(text: str) -> FaultSpec:
    try:
        return parse_fault(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    code = _main(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: the Temporal SDK's native threads can abort it (exit 134) after
    # an otherwise clean run (measured ~40% of short scripts; see notes/temporal-facts.md).
    os._exit(int(code))


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.temporal_api_key:  # handed on through the environment only, never a file or command line
        os.environ[API_KEY_ENV] = args.temporal_api_key
    connection = ConnectionOptions(args.tls_cert, args.tls_key, args.tls_ca)
    try:
        settings = load_settings(
            args.home, args.temporal_address, args.namespace, args.model_url, args.model, connection,
            ledger_url=args.ledger, artifacts=args.artifacts, task_queue=args.task_queue, workers=args.workers,
        )  # fmt: skip
        _export_for_children(settings)
        if args.verify:
            from checkpoint_tui.verify import run_verify

            return asyncio.run(run_verify(settings, Path(args.json_path) if args.json_path else None))
        if args.command == "start":
            return asyncio.run(_start(settings, args))
        if args.command == "status":
            return asyncio.run(_status(settings, args.run, args.as_json))
        if args.command == "stop":
            return _stop(settings)
        if args.command == "supervise":
            from checkpoint_tui.headless import supervise_command

            return asyncio.run(supervise_command(settings))
        if args.command == "worker":
            from checkpoint_tui.headless import supervise_command

            return asyncio.run(supervise_command(settings, pool=True))
        if args.command == "chaos":
            from checkpoint_tui.chaos import chaos_command

            json_out = Path(args.chaos_json) if args.chaos_json else None
            return asyncio.run(chaos_command(settings, args.seed, args.steps, args.kills, json_out))
        if args.command == "compare":
            from checkpoint_tui.compare import compare_command

            return asyncio.run(compare_command(settings, args.steps, args.kill_at))
        if args.command == "model-server":
            from checkpoint_tui.ops.modelserver import ensure_model_server

            print(ensure_model_server(settings))
            return Exit.OK
        from checkpoint_tui.tui.app import run_app

        return run_app(settings, refresh=args.refresh)
    except UserFacingError as err:
        print(f"checkpoint-tui: {err}", file=sys.stderr)
        return Exit.UNAVAILABLE
    except KeyboardInterrupt:
        return Exit.FAILED


def _export_for_children(settings: Settings) -> None:
    """Hand the shared-ledger settings on through the environment, so every `python -m checkpoint_tui`
    this process starts (chaos's supervisor, compare's sides) uses the same ledger and artifacts root."""
    if settings.ledger_url:
        os.environ[LEDGER_URL_ENV] = settings.ledger_url
    if settings.artifacts_root:
        os.environ["CHECKPOINT_ARTIFACTS"] = str(settings.artifacts_root)
    if settings.task_queue_name:
        os.environ["CHECKPOINT_TASK_QUEUE"] = settings.task_queue_name


async def _start(settings: Settings, args: argparse.Namespace) -> int:
    from checkpoint_tui.headless import start_command

    return await start_command(settings, args.steps, args.pace, args.fault, args.wait)


async def _status(settings: Settings, run_id: str | None, as_json: bool) -> int:
    from checkpoint_tui.headless import status_command

    return await status_command(settings, run_id, as_json)


def _stop(settings: Settings) -> int:
    from checkpoint_tui.headless import stop_command

    return stop_command(settings)
