"""The argument parser: every flag is checked here, before anything is started (a bad one exits 2
with one line). Each subcommand names its function in cli/commands.py."""

from __future__ import annotations

import argparse
import difflib
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from checkpoint_tui.cli import chaos_flags, doctor, gameday, workload_flags
from checkpoint_tui.errors import Exit, UsageError
from checkpoint_tui.files import check_output_dir, check_output_path
from checkpoint_tui.loop_worker.shared import MAX_PACE, MAX_STEPS, RUN_ID_PATTERN
from checkpoint_tui.settings import is_postgres_url

if TYPE_CHECKING:
    from checkpoint_tui.ledger.faults import FaultSpec

MAX_RUNS = chaos_flags.MAX_RUNS
MAX_POOL = 32  # workers per supervisor: each is a process with its own Temporal connection
REFRESH_RANGE = (0.1, 60.0)


def has_default(action: argparse.Action) -> bool:
    """A default worth showing: not "unset", not a switch's off, not an empty list (0 is one)."""
    if action.nargs == 0 or action.default is None or action.default is False:
        return False
    return action.default != [] and action.default is not argparse.SUPPRESS


class _Help(argparse.HelpFormatter):
    """`--help` shows each flag's default, unless its help already says it (e.g. "default: cwd",
    where the value comes from the environment or from another flag at run time), and the choices a
    metavar stands for (--framework's: found when shown, see workload_flags.FrameworkNames)."""

    def _get_help_string(self, action: argparse.Action) -> str:  # the hook ArgumentDefaultsHelpFormatter uses
        text = action.help or ""
        if action.choices is not None and action.metavar is not None and "%(choices)" not in text:
            text += " (one of: %(choices)s)"
        if has_default(action) and action.option_strings and not re.search(r"\bdefault\b", text):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, not a usage dump
        self.exit(Exit.USAGE, f"{self.prog}: error: {message} (see --help)\n")

    def _check_value(self, action: argparse.Action, value) -> None:
        """A mistyped command gets the nearest one (`chaso`: did you mean 'chaos'?). argparse asks this
        method about every value with choices; only the subcommand's answer changes."""
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            near = difflib.get_close_matches(value, list(action.choices), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else f" (one of: {', '.join(action.choices)})"
            self.error(f"unknown command {value!r}{hint}")
        super()._check_value(action, value)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="checkpoint-tui",
        description="A terminal chaos lab for durable AI-agent execution (Temporal + an exactly-once ledger).",
    )
    p.add_argument("--version", action=_Version)
    _where_flags(p)
    _app_flags(p)
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    _run_commands(sub)
    _proof_commands(sub)
    doctor.add_parser(sub, _output_file, _bounded_int, _float_in)
    _replay_command(sub)
    return p


def _command(name: str, module: str = "commands"):
    """The function of cli/<module>.py that runs a subcommand, imported only when it runs: parsing,
    --help and a usage error import no Temporal SDK and no workload (each CLI process pays for its imports)."""

    def run(args: argparse.Namespace, settings, workload) -> int:
        import importlib

        return getattr(importlib.import_module(f"checkpoint_tui.cli.{module}"), name)(args, settings, workload)

    run.__name__ = run.__qualname__ = name
    return run


class _Version(argparse.Action):
    """--version, as argparse's own prints it, the version looked up only when asked (importlib.metadata
    reads the installed distributions: every parse would pay for it)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs) -> None:
        kwargs.update(default=argparse.SUPPRESS, nargs=0, help="show program's version number and exit")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace, values, option_string=None) -> None:
        print(f"{parser.prog} {_version()}")
        parser.exit()


def _version() -> str:
    """The installed distribution's version (pyproject's), so a wheel and a checkout say the same."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("checkpoint-tui")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "unknown (not installed)"


def _where_flags(p: argparse.ArgumentParser) -> None:
    """Where the home, Temporal, the ledger and the artifacts are."""
    p.add_argument("--home", help="directory holding run/ and artifacts/ (env CHECKPOINT_HOME; default: cwd)")
    p.add_argument(
        "--temporal-address",
        metavar="HOST:PORT",
        help="use this Temporal server and start none (env CHECKPOINT_TEMPORAL_ADDRESS; default: a dev server "
        "this home starts)",
    )
    p.add_argument("--namespace", help="Temporal namespace (env CHECKPOINT_NAMESPACE; default: default)")
    p.add_argument("--tls-cert", metavar="PEM", help="client certificate for mTLS to a Temporal cluster")
    p.add_argument("--tls-key", metavar="PEM", help="client private key for mTLS")
    p.add_argument("--tls-ca", metavar="PEM", help="CA certificate to verify the server (default: system roots)")
    p.add_argument("--tls-server-name", metavar="NAME", help="the name the server's certificate holds (SNI)")
    p.add_argument(
        "--profile",
        metavar="NAME",
        help="Temporal's environment configuration: this profile (env TEMPORAL_PROFILE) of --config-file",
    )
    p.add_argument(
        "--config-file",
        metavar="TOML",
        help="Temporal's client configuration file (env TEMPORAL_CONFIG_FILE; the TEMPORAL_* variables "
        "override it, these flags override both)",
    )
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
        type=workload_flags.task_queue,
        help="Temporal task queue (env CHECKPOINT_TASK_QUEUE; default: one per home or per shared ledger)",
    )
    workload_flags.add_global_flags(p)  # --worker-cmd, and --workflow/--input for --verify and the app


def _app_flags(p: argparse.ArgumentParser) -> None:
    """The pool, the model and the app itself."""
    p.add_argument(
        "--workers",
        type=_bounded_int(1, MAX_POOL),
        default=None,
        metavar="N",
        help=f"local workers the supervisor keeps polling, 1..{MAX_POOL} (default 1; a worker command that cannot "
        "be preloaded, such as node, gets 2, so a kill's attempts go to the other at once)",
    )
    p.add_argument(
        "--no-spare",
        action="store_true",
        help="no warm spare: every replacement worker starts cold (ours: no standby worker; a user's Python "
        "worker command: no preloaded spare)",
    )
    p.add_argument(
        "--model-url",
        metavar="URL",
        help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080 (env CHECKPOINT_MODEL_URL; "
        "key from CHECKPOINT_API_KEY or OPENAI_API_KEY); default: the offline provider",
    )
    p.add_argument(
        "--model",
        help="preferred model id, checked against /v1/models (env CHECKPOINT_MODEL; default: the first one listed)",
    )
    p.add_argument(
        "--refresh",
        type=_float_in(*REFRESH_RANGE),
        default=0.5,
        metavar="S",
        help="seconds between the app's refreshes (default 0.5; 1.0 costs less CPU while a run is live)",
    )
    p.add_argument("--stats", metavar="PATH", type=_output_file, help=argparse.SUPPRESS)  # per-refresh costs,
    # for bench/tui_tick.py
    p.add_argument("--verify", action="store_true", help="run the headless kill/retry/restart proof and exit")
    p.add_argument(
        "--json", dest="json_path", metavar="PATH", type=_output_file, help="with --verify: also write the results here"
    )
    p.add_argument(
        "--junit",
        dest="verify_junit",
        metavar="PATH",
        type=_output_file,
        help="with --verify: also write the checks as JUnit XML here",
    )
    p.add_argument(
        "--proof",
        dest="verify_proof",
        metavar="DIR",
        type=_output_dir,
        help="with --verify: write a proof bundle here (report, JUnit, histories, ledger CSVs, worker events, SVG)",
    )
    p.add_argument(
        "--strict-latency",
        action="store_true",
        help="with --verify: a restart or resume slower than its target fails it too (without: said, "
        "SLOW, not gating; a loaded CI machine is slow, not wrong)",
    )


def _run_commands(sub) -> None:
    start = sub.add_parser("start", help="start a run (headless); prints its run id")
    start.set_defaults(func=_command("start"))
    start.add_argument("--steps", type=_bounded_int(1, MAX_STEPS), default=None, help=f"1..{MAX_STEPS} (default 30)")
    start.add_argument(
        "--pace",
        type=_float_in(0, MAX_PACE),
        default=None,
        help="timer/think-time scale (0 = none; at most 100; default 1)",
    )
    start.add_argument("--wait", action="store_true", help="supervise and show progress until the run ends")
    start.add_argument(
        "--runs",
        type=_bounded_int(1, MAX_RUNS),
        default=1,
        help=f"start this many runs at once, one run id per line (1..{MAX_RUNS}); with --wait, "
        "exit 0 only if every one COMPLETED",
    )
    workload_flags.add_run_flags(start)
    start.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="SPEC",
        type=_fault_spec,
        help="transient:STEP[:COUNT] | garble:STEP | crash_in_tool:STEP | crash_before_claim:STEP"
        " | crash_after_claim:STEP[:file|db|email] | crash_after_write:STEP[:file|db|email] | crash_after_stamp:STEP"
        " | kill_at:STEP | freeze:STEP",
    )

    status = sub.add_parser("status", help="summary of a run from the ledger + Temporal")
    status.set_defaults(func=_command("status", "status"))
    status.add_argument("run", nargs="?", help="run id (default: the latest)")
    status.add_argument("--json", action="store_true", dest="as_json", help="machine-readable output")

    sub.add_parser("stop", help="stop the worker, the dev server and the model server this home started").set_defaults(
        func=_command("stop")
    )
    supervise = sub.add_parser("supervise", help="run a headless supervisor for this home until SIGTERM")
    supervise.set_defaults(func=_command("supervise"))
    # chaos's own: die with that process (the kernel's parent-death signal); not for people
    supervise.add_argument("--bound-to", type=_bounded_int(2, 2**22), default=None, help=argparse.SUPPRESS)
    # chaos's own too: imported and waiting for the home's supervisor lock, it takes over once the lock is let
    # go (the supervisor killed, or ended): a killed supervisor's successor without an interpreter's start
    supervise.add_argument("--standby", action="store_true", help=argparse.SUPPRESS)
    # chaos's own too: its hop fails a dead worker's attempts; the supervisor resets sticky queues only
    supervise.add_argument("--attempts-by-hop", action="store_true", help=argparse.SUPPRESS)
    sub.add_parser(
        "worker",
        help="run a pool of --workers N on this host against a shared cluster and ledger until SIGTERM",
    ).set_defaults(func=_command("pool"))
    sub.add_parser(
        "model-server", help="start (or find) the opt-in local llama.cpp model server; prints its URL"
    ).set_defaults(func=_command("model_server"))


def _proof_commands(sub) -> None:
    chaos_flags.add_parser(sub, chaos_flags.ArgTypes(_bounded_int, _float_in, _output_file, _output_dir)).set_defaults(
        func=_command("chaos")
    )
    gameday.add_parser(sub, _bounded_int, _float_in)
    compare = sub.add_parser("compare", help="naive loop vs durable loop under the same SIGKILL")
    compare.set_defaults(func=_command("compare"))
    compare.add_argument("--steps", type=_bounded_int(2, 1000), default=6, help="steps of each loop's run (2..1000)")
    compare.add_argument(
        "--kill-at", type=_bounded_int(1, 999), default=3, help="kill right after this step's email (< --steps)"
    )


def _replay_command(sub) -> None:
    replay = sub.add_parser(
        "replay", help="replay recorded histories against this checkout's workflow code (a non-determinism gate)"
    )
    replay.set_defaults(func=_command("replay"))
    replay.add_argument("runs", nargs="*", metavar="RUN_ID", type=_run_id, help="runs of this home's ledger")
    replay.add_argument("--all", action="store_true", dest="all_runs", help="every run of this home's ledger")
    replay.add_argument(
        "--from",
        dest="from_path",
        metavar="DIR",
        type=_existing_path,
        help="history JSON files (a corpus, a proof bundle's histories/): no server needed",
    )
    replay.add_argument(
        "--export",
        dest="export_dir",
        metavar="DIR",
        type=_output_dir,
        help="also write the histories here as JSON (the format of `temporal workflow show --output json`)",
    )
    replay.add_argument("--junit", dest="replay_junit", metavar="PATH", type=_output_file, help="results as JUnit XML")


def _run_id(text: str) -> str:
    if not RUN_ID_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a run id (run-YYYYMMDD-HHMMSS-xxxx)")
    return text


def _existing_path(text: str) -> Path:
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text}: no such file or directory")
    return path


def _output_file(text: str) -> Path:
    """Checked before anything runs (files.check_output_path): a link, a directory or a device there
    is refused, so a run's report is never lost at its end."""
    try:
        return check_output_path(text, "output")
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("output ")) from None


def _output_dir(text: str) -> Path:
    try:
        return check_output_dir(text, "output")
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("output ")) from None


def _bounded_int(low: int, high: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} must be between {low} and {high}")
        return value

    return parse


def _float_in(low: float, high: float):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} must be a number from {low:g} to {high:g}")
        return value

    return parse


def _ledger_url(text: str) -> str:
    if not is_postgres_url(text):
        raise argparse.ArgumentTypeError(f"takes a postgresql:// URL, not {text.split(':', 1)[0]}:...")
    return text


def _fault_spec(text: str) -> FaultSpec:
    from checkpoint_tui.ledger.faults import parse_fault

    try:
        return parse_fault(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
