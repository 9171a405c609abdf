"""The Lab: `chaos`, `--verify` and `doctor` of one home, each run as the CLI itself (see the package's
docstring for why a process and not a call)."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import secrets
import shlex
import stat
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from checkpoint_tui.errors import Exit, UsageError
from checkpoint_tui.lab import child
from checkpoint_tui.lab.result import (
    LabError,
    Result,
    chaos_verdict,
    checked_document,
    doctor_verdict,
    read_report,
    verify_verdict,
)

DEFAULT_TIMEOUT_S = 900.0  # one command, with the runs it starts; a CI job's step is usually capped above this
MAX_TIMEOUT_S = 24 * 3600.0
PYTHONS = frozenset({"python", "python3"})
# Where the lab writes is the Lab's to say: these flags in `args` would send the report elsewhere (a
# stale one would then be read back as this run's) or end the command without one.
RESERVED = frozenset({"--json", "--junit", "--proof", "--save-schedule", "--shrink", "--home", "--verify"})
# Inherited from the caller's environment they would point every Lab at one server, queue, ledger or
# artifacts folder (pytest-xdist workers would share them): a Lab's home is its own unless its
# arguments say otherwise.
LOCATION_ENV = (
    "CHECKPOINT_HOME",
    "CHECKPOINT_TEMPORAL_ADDRESS",
    "CHECKPOINT_TASK_QUEUE",
    "CHECKPOINT_LEDGER_URL",
    "CHECKPOINT_ARTIFACTS",
    "CHECKPOINT_NAMESPACE",
)

WorkerCmd = str | Sequence[str]


class Lab:
    """A lab on one home of its own: the embedded dev server by default (started on first use, one per
    home), or `temporal_address` (starts none; chaos there kills no server). Calls run
    one at a time. Closing it (or leaving the `with`, or the interpreter exiting) stops what the home
    runs, once one of its commands got to run."""

    def __init__(
        self,
        home: str | os.PathLike[str],
        *,
        temporal_address: str | None = None,
        ledger_url: str | None = None,
        task_queue: str | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        python: str = sys.executable,
    ) -> None:
        from checkpoint_tui.files.home import resolve_home

        timeout_s = check_timeout(timeout_s)
        try:
            self.home = resolve_home(os.fspath(home), "Lab home")
            self.home.mkdir(parents=True, exist_ok=True)
        except UsageError as err:
            raise LabError(str(err), Exit.USAGE) from None
        except OSError as err:
            raise LabError(f"Lab home {self.home}: {err.strerror or err}", Exit.USAGE) from None
        self.cwd = Path(cwd).resolve() if cwd is not None else Path.cwd()
        self.temporal_address, self.task_queue, self.timeout_s, self.python = (
            temporal_address,
            task_queue,
            timeout_s,
            python,
        )
        self.env = {k: v for k, v in (os.environ if env is None else env).items() if k not in LOCATION_ENV}
        if ledger_url is not None:  # through the environment: a password never lands on a command line
            self.env["CHECKPOINT_LEDGER_URL"] = ledger_url
        self._lock = threading.Lock()
        self._serial = itertools.count(1)
        self._closed, self._started = False, [False]
        self._out = self.home / "lab"
        # If the caller never closes it, the interpreter's exit does (a list: the finalizer sees it change).
        self._finalizer = weakref.finalize(self, child.stop_home, self._stop_argv(), self.cwd, self.env, self._started)

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chaos(
        self,
        *,
        worker_cmd: WorkerCmd | None = None,
        workflow: str | None = None,
        input: object = None,  # noqa: A002
        aim: str | None = None,
        seed: int = 1,
        kills: int | None = None,
        task_queue: str | None = None,
        steps: int | None = None,
        pauses: int | None = None,
        partitions: int | None = None,
        resets: int | None = None,
        runs: int | None = None,
        schedule: str | os.PathLike[str] | None = None,
        strict_models: bool = False,
        until_covered: bool = False,
        junit: bool = True,
        proof: bool = False,
        workers: Iterable[tuple[str, WorkerCmd]] = (),
        framework: str | None = None,
        effects: Iterable[str] = (),
        every_window: bool = False,
        model_faults: int | None = None,
        model_endpoints: Iterable[tuple[str, str]] = (),
        args: Sequence[str] = (),
        global_args: Sequence[str] = (),
    ) -> Result:
        """`checkpoint-tui chaos` with these words (see its --help). `workers`: a fleet's (queue,
        command) pairs (`--worker QUEUE=CMD`); `framework`: the global --framework; `effects`: where the
        tools' effects land (`--effects SPEC` each; relative paths from `cwd`); `every_window`: every tool
        killed once in each crash point's window (`--every-window`); `model_endpoints`: (NAME, URL) pairs
        (`--model-endpoint NAME=URL`), in front of which `model_faults` seeded faults are put; `args`: other
        chaos flags and `global_args` other global ones (before the command), as the CLI spells them.
        `schedule` is resolved against `cwd`, as the worker commands are."""
        name = self._name("chaos")
        report, junit_path = self._out / f"{name}.json", (self._out / f"{name}.xml" if junit else None)
        proof_path = self._out / f"{name}-proof" if proof else None
        words = ["chaos", "--seed", str(seed), "--json", str(report)]
        words += _opt("--workflow", workflow) + _opt("--input", _json_input(input)) + _opt("--aim", aim)
        counts = {"--kills": kills, "--steps": steps, "--pauses": pauses, "--partitions": partitions}
        counts |= {"--resets": resets, "--runs": runs, "--model-faults": model_faults}
        for flag, value in counts.items():
            words += _opt(flag, None if value is None else str(value))
        words += _opt("--schedule", None if schedule is None else str(self.cwd / Path(schedule)))
        words += (["--strict-models"] if strict_models else []) + (["--until-covered"] if until_covered else [])
        words += ["--every-window"] if every_window else []
        words += _opt("--junit", _text(junit_path)) + _opt("--proof", _text(proof_path))
        endpoints = [w for pair in model_endpoints for w in ("--model-endpoint", "=".join(pair))]
        front = self._front(worker_cmd, task_queue, workers, framework, endpoints + _checked(global_args), effects)
        exit_code, output = self._run(name, front, [*words, *_checked(args)])
        doc = read_report(report, exit_code, output)
        passed = exit_code == Exit.OK
        verdict = chaos_verdict(checked_document("chaos", doc, report, exit_code), passed)
        log = self._out / f"{name}.log"
        return Result("chaos", passed, verdict, exit_code, doc, report, junit_path, proof_path, log, output)

    def verify(
        self,
        *,
        worker_cmd: WorkerCmd | None = None,
        workflow: str | None = None,
        input: object = None,  # noqa: A002
        task_queue: str | None = None,
        junit: bool = True,
        framework: str | None = None,
        global_args: Sequence[str] = (),
    ) -> Result:
        """`checkpoint-tui --verify` (a user's workflow with `worker_cmd` and `workflow`)."""
        name = self._name("verify")
        report, junit_path = self._out / f"{name}.json", (self._out / f"{name}.xml" if junit else None)
        front = self._front(worker_cmd, task_queue, (), framework, global_args)
        front += _opt("--workflow", workflow) + _opt("--input", _json_input(input))
        front += ["--verify", "--json", str(report)] + _opt("--junit", _text(junit_path))
        exit_code, output = self._run(name, front, [])
        doc = read_report(report, exit_code, output)
        verdict = verify_verdict(checked_document("verify", doc, report, exit_code))
        log = self._out / f"{name}.log"
        return Result("verify", exit_code == Exit.OK, verdict, exit_code, doc, report, junit_path, None, log, output)

    def doctor(
        self,
        *,
        worker_cmd: WorkerCmd | None = None,
        workflow: str | None = None,
        input: object = None,  # noqa: A002
        task_queue: str | None = None,
        measure: bool = False,
        framework: str | None = None,
        args: Sequence[str] = (),
        global_args: Sequence[str] = (),
    ) -> Result:
        """`checkpoint-tui doctor` (with `measure`, `doctor --measure`): what a kill costs each activity
        type; `passed` when there is no finding, each in `findings`."""
        name = self._name("doctor")
        report = self._out / f"{name}.json"
        words = ["doctor", "--json", str(report)] + _opt("--workflow", workflow) + _opt("--input", _json_input(input))
        words += ["--measure"] if measure else []
        front = self._front(worker_cmd, task_queue, (), framework, global_args)
        exit_code, output = self._run(name, front, [*words, *_checked(args)])
        doc = read_report(report, exit_code, output)
        verdict = doctor_verdict(checked_document("doctor", doc, report, exit_code))
        log = self._out / f"{name}.log"
        return Result("doctor", exit_code == Exit.OK, verdict, exit_code, doc, report, None, None, log, output)

    def close(self) -> None:
        """Stop everything this home runs (`checkpoint-tui --home HOME stop`) if one of this Lab's
        commands got to run; safe to call twice."""
        if not self._closed:
            self._closed = True
            self._finalizer()

    def _name(self, kind: str) -> str:
        """A name no earlier Lab on this home used: a report left by another is never read as this one's."""
        return f"{kind}-{next(self._serial)}-{secrets.token_hex(4)}"

    def _front(
        self,
        worker_cmd: WorkerCmd | None,
        task_queue: str | None,
        workers: Iterable[tuple[str, WorkerCmd]],
        framework: str | None = None,
        global_args: Sequence[str] = (),
        effects: Iterable[str] = (),
    ) -> list[str]:
        """The global flags: home, server, queue, the worker command(s), the framework, the rest."""
        if isinstance(effects, str):  # one spec, not its characters
            effects = [effects]
        front = ["--home", str(self.home)] + _opt("--temporal-address", self.temporal_address)
        front += [w for spec in effects for w in ("--effects", str(spec))]
        front += _opt("--task-queue", task_queue or self.task_queue) + _opt("--framework", framework)
        front += _opt("--worker-cmd", None if worker_cmd is None else self.command_line(worker_cmd))
        for queue, cmd in workers:
            front += ["--worker", f"{queue}={self.command_line(cmd)}"]
        return front + _checked(global_args)

    def command_line(self, cmd: WorkerCmd) -> str:
        """A worker command as the CLI takes it; a bare `python`/`python3` is this interpreter (the
        test's own environment, where the worker's packages are)."""
        argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
        if argv and argv[0] in PYTHONS:
            argv[0] = self.python
        return shlex.join(argv)

    def _stop_argv(self) -> list[str]:
        return [
            self.python,
            "-P",
            "-m",
            "checkpoint_tui",
            "--home",
            str(self.home),
            *_opt("--temporal-address", self.temporal_address),
            "stop",
        ]

    def _run(self, name: str, front: list[str], words: list[str]) -> tuple[int, str]:
        """Run the CLI, bound to this process (the kernel SIGTERMs it if this process dies); (exit code,
        its output). Exit 2 or 3 raises LabError with its one line; a timeout or an interrupt ends it
        (SIGTERM, then SIGKILL) and stops the home's processes."""
        with self._lock:
            if self._closed:  # checked under the lock: a close() while this call waited for it wins
                raise LabError("this lab is closed", Exit.USAGE)
            started_before, self._started[0] = self._started[0], True  # a close() from now on stops the home
            # -P: the caller's folder (a project's root, its own `queue.py`...) is not on the command's path
            argv = [
                self.python,
                "-P",
                "-m",
                "checkpoint_tui.lab.bound",
                str(os.getpid()),
                *(["--started"] if started_before else []),
                *front,
                *words,
            ]
            log_path = self._output_dir() / f"{name}.log"
            with child.new_file(log_path) as log:
                proc = subprocess.Popen(
                    argv,
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            try:
                proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                child.end(proc)
                child.stop_home(self._stop_argv(), self.cwd, self.env, self._started)  # the lab stays usable
                raise LabError(
                    f"{words[0] if words else 'verify'} did not finish in {self.timeout_s:g} s (stopped)", Exit.FAILED
                ) from None
            except BaseException:  # KeyboardInterrupt too: nothing of the run is left behind
                child.end(proc)
                child.stop_home(self._stop_argv(), self.cwd, self.env, self._started)
                raise
        output = child.tail(log_path)
        if proc.returncode == Exit.USAGE:  # refused before it started anything: the home is not ours to stop
            self._started[0] = started_before
            raise LabError(child.one_line(output, proc.returncode), proc.returncode)
        if proc.returncode not in (Exit.OK, Exit.FAILED):
            raise LabError(child.one_line(output, proc.returncode), proc.returncode)
        return proc.returncode, output

    def _output_dir(self) -> Path:
        """HOME/lab: a directory of this user's, never a link (what it holds is read back as results)."""
        with contextlib.suppress(FileExistsError):
            os.mkdir(self._out, 0o700)
        st = os.lstat(self._out)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise LabError(f"{self._out} is not a folder of this user's (a link, or a file): remove it", Exit.USAGE)
        return self._out


def check_timeout(value: object) -> float:
    """A command's time limit: seconds in (0, MAX_TIMEOUT_S]; a number's text is taken (an ini value)."""
    try:
        seconds = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else math.nan
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_TIMEOUT_S:
        raise LabError(
            f"timeout must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], not {str(value)[:40]!r}", Exit.USAGE
        )
    return seconds


def _checked(args: Sequence[str]) -> list[str]:
    """The words, unless one names (or abbreviates, as argparse allows) a flag the Lab sets itself."""
    if isinstance(args, str):
        raise LabError("args and global_args are lists of words, not one string", Exit.USAGE)
    words = [str(a) for a in args]
    flags = {w.split("=", 1)[0] for w in words if w.startswith("--") and len(w) > 2}
    taken = sorted(f for f in flags if any(r.startswith(f) for r in RESERVED))
    if taken:
        raise LabError(f"{', '.join(taken)}: the Lab chooses where its reports go (see Result)", Exit.USAGE)
    return words


def _opt(flag: str, value: str | None) -> list[str]:
    return [] if value is None else [flag, value]


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _json_input(value: object) -> str | None:
    """A workflow input: a str is taken as JSON text already; anything else is encoded."""
    return value if value is None or isinstance(value, str) else json.dumps(value)
