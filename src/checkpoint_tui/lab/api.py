"""The Lab and its Result (checkpoint_tui.lab re-exports them; see its docstring)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from checkpoint_tui.errors import Exit

DEFAULT_TIMEOUT_S = 900.0  # one command, with the runs it starts; a CI job's step is usually capped above this
TERM_GRACE_S = 30.0  # after SIGTERM a chaos writes its report and stops its processes
MAX_OUTPUT = 64 * 1024  # of the command's printed text kept in a result (the report holds the rest)
MAX_REPORT = 64 * 1024 * 1024
PYTHONS = frozenset({"python", "python3"})

WorkerCmd = str | Sequence[str]


class LabError(Exception):
    """The command could not run the experiment: a usage error (exit 2), Temporal or the ledger out of
    reach (3), a timeout, or no report. str(err) is the CLI's one-line message."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    observed: str


@dataclass(frozen=True)
class Result:
    """What one `chaos`, `--verify` or `doctor` found. `passed` is the command's verdict (exit 0);
    `str(result)` is its verdict sentence. `report` is the JSON report as written (at `report_path`)."""

    command: str
    passed: bool
    verdict: str
    exit_code: int
    report: dict
    report_path: Path
    junit_path: Path | None = None
    proof_path: Path | None = None
    output: str = field(default="", repr=False)

    def __str__(self) -> str:
        return self.verdict

    @property
    def checks(self) -> list[Check]:
        return [Check(str(c.get("name")), c.get("ok") is True, str(c.get("observed", ""))) for c in
                self.report.get("checks", []) if isinstance(c, dict)]  # fmt: skip

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def audit(self) -> dict:
        """The lead run's audit (chaos): activities, re-executed calls, at risk, lost, duplicated..."""
        audit = self.report.get("audit")
        return audit if isinstance(audit, dict) else {}

    @property
    def at_risk(self) -> list[dict]:
        """Re-executed tool calls (or other activities) with no effect through the ledger: each with its
        `tool`, `call_id`, `activity_id` and `attempt`."""
        return list(self.audit.get("at_risk") or [])

    @property
    def re_executed(self) -> list[dict]:
        return list(self.audit.get("re_executed") or [])

    @property
    def guarded(self) -> list[dict]:
        """Re-executed calls whose effects went through the ledger (each done once)."""
        return list(self.audit.get("guarded_re_executed") or [])

    @property
    def model_reruns(self) -> list[dict]:
        return list(self.audit.get("model_reruns") or [])

    @property
    def tokens_paid_again(self) -> int:
        return int(self.audit.get("tokens_paid_again") or 0)

    @property
    def duplicated(self) -> int:
        return int(self.audit.get("duplicated") or 0)

    @property
    def lost(self) -> int:
        return int(self.audit.get("lost") or 0)

    @property
    def lost_work(self) -> int:
        """Units of work the application lost (a task that sat out its timeout, a failed workflow, a
        workflow task failing for good): not what the kills cost in waiting."""
        return int(self.audit.get("lost_work_count") or 0)

    @property
    def kills(self) -> list[dict]:
        return list(self.report.get("kills") or [])

    @property
    def windows(self) -> dict[str, int]:
        """The kill windows hit (model call, tool call, the effect's claim/write/stamp, ...), counted."""
        found = self.report.get("windows")
        return dict(found) if isinstance(found, dict) else {}


def assert_passed(result: Result) -> None:
    """Raise AssertionError whose message is the verdict (the audit's sentence, each call at risk named
    by tool and call id, then the checks that failed), unless the result passed."""
    __tracebackhide__ = True  # pytest: the failure points at the caller's line
    if not result.passed:
        raise AssertionError(result.verdict)


def chaos_verdict(report: dict, passed: bool) -> str:
    """The verdict of a chaos report: the lead audit's sentence (the one the app and `status` show),
    then each failed check with what it saw."""
    audit = report.get("audit") if isinstance(report.get("audit"), dict) else {}
    sentence = audit.get("verdict") if isinstance(audit.get("verdict"), str) else None
    failed = [c for c in report.get("checks", []) if isinstance(c, dict) and c.get("ok") is not True]
    head = f"chaos seed {report.get('seed')}: {'PASS' if passed else 'FAIL'}"
    parts = [f"{head}: {sentence}" if sentence else head]
    parts += [f"{c.get('name')}: {str(c.get('observed', ''))[:600]}" for c in failed[:5]]
    return " — ".join(parts[:1]) + "".join(f"\n  {p}" for p in parts[1:])


class Lab:
    """A lab on one home: the embedded dev server by default (started on first use, one per home),
    or `temporal_address` (starts none; chaos needs the embedded one: it kills it). Calls run one at a
    time; a home is held by one experiment at a time (another process's gets the CLI's exit 2)."""

    def __init__(
        self, home: str | os.PathLike[str], *, temporal_address: str | None = None, ledger_url: str | None = None,
        task_queue: str | None = None, cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S, python: str = sys.executable,
    ) -> None:  # fmt: skip
        self.home = Path(home).resolve()
        self.home.mkdir(parents=True, exist_ok=True)
        self.cwd = Path(cwd).resolve() if cwd is not None else Path.cwd()
        self.temporal_address, self.task_queue, self.timeout_s, self.python = (
            temporal_address, task_queue, timeout_s, python)  # fmt: skip
        self.env = dict(os.environ if env is None else env)
        if ledger_url is not None:  # through the environment: a password never lands on a command line
            self.env["CHECKPOINT_LEDGER_URL"] = ledger_url
        self._lock = threading.Lock()
        self._serial = itertools.count(1)
        self._closed = False
        self._out = self.home / "lab"

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chaos(
        self, *, worker_cmd: WorkerCmd | None = None, workflow: str | None = None, input: object = None,  # noqa: A002
        aim: str | None = None, seed: int = 1, kills: int | None = None, task_queue: str | None = None,
        steps: int | None = None, pauses: int | None = None, partitions: int | None = None,
        resets: int | None = None, runs: int | None = None, schedule: str | os.PathLike[str] | None = None,
        strict_models: bool = False, until_covered: bool = False, junit: bool = True, proof: bool = False,
        workers: Iterable[tuple[str, WorkerCmd]] = (), framework: str | None = None, args: Sequence[str] = (),
    ) -> Result:  # fmt: skip
        """`checkpoint-tui chaos` with these words (see its --help); `workers` are (queue, command) pairs
        of a fleet (`--worker QUEUE=CMD`); `framework` the global --framework; `args` any other chaos
        flags, as the CLI spells them."""
        n = next(self._serial)
        report, junit_path = self._out / f"chaos-{n}.json", (self._out / f"chaos-{n}.xml" if junit else None)
        proof_path = self._out / f"chaos-{n}-proof" if proof else None
        words = ["chaos", "--seed", str(seed), "--json", str(report)]
        words += _opt("--workflow", workflow) + _opt("--input", _json_input(input)) + _opt("--aim", aim)
        for flag, value in (("--kills", kills), ("--steps", steps), ("--pauses", pauses),
                            ("--partitions", partitions), ("--resets", resets), ("--runs", runs)):  # fmt: skip
            words += _opt(flag, None if value is None else str(int(value)))
        words += _opt("--schedule", None if schedule is None else str(Path(schedule).resolve()))
        words += (["--strict-models"] if strict_models else []) + (["--until-covered"] if until_covered else [])
        words += _opt("--junit", junit_path and str(junit_path)) + _opt("--proof", proof_path and str(proof_path))
        front = self._front(worker_cmd, task_queue, workers, framework)
        exit_code, output = self._run(front, [*words, *args])
        doc = _report(report, exit_code, output)
        passed = exit_code == Exit.OK
        return Result("chaos", passed, chaos_verdict(doc, passed), exit_code, doc, report, junit_path,
                      proof_path, output)  # fmt: skip

    def verify(
        self, *, worker_cmd: WorkerCmd | None = None, workflow: str | None = None, input: object = None,  # noqa: A002
        task_queue: str | None = None, junit: bool = True, framework: str | None = None, args: Sequence[str] = (),
    ) -> Result:  # fmt: skip
        """`checkpoint-tui --verify` (a user's workflow with `worker_cmd` and `workflow`)."""
        n = next(self._serial)
        report, junit_path = self._out / f"verify-{n}.json", (self._out / f"verify-{n}.xml" if junit else None)
        front = self._front(worker_cmd, task_queue, (), framework)
        front += _opt("--workflow", workflow) + _opt("--input", _json_input(input))
        front += ["--verify", "--json", str(report)] + _opt("--junit", junit_path and str(junit_path))
        exit_code, output = self._run(front, list(args))
        doc = _report(report, exit_code, output)
        failed = [c.get("name") for c in doc.get("checks", []) if isinstance(c, dict) and c.get("ok") is not True]
        verdict = (f"verify: ALL CHECKS PASS — {doc.get('passed')}/{doc.get('total')}" if not failed else
                   f"verify: CHECKS FAILED — {len(failed)}/{doc.get('total')}: {', '.join(map(str, failed))}")
        return Result("verify", exit_code == Exit.OK, verdict, exit_code, doc, report, junit_path, None, output)

    def doctor(
        self, *, worker_cmd: WorkerCmd | None = None, workflow: str | None = None, input: object = None,  # noqa: A002
        task_queue: str | None = None, measure: bool = False, framework: str | None = None,
        args: Sequence[str] = (),
    ) -> Result:  # fmt: skip
        """`checkpoint-tui doctor` (with `measure`, `doctor --measure`): what a kill costs each activity type."""
        n = next(self._serial)
        report = self._out / f"doctor-{n}.json"
        words = ["doctor", "--json", str(report)] + _opt("--workflow", workflow) + _opt("--input", _json_input(input))
        words += ["--measure"] if measure else []
        exit_code, output = self._run(self._front(worker_cmd, task_queue, (), framework), [*words, *args])
        doc = _report(report, exit_code, output)
        last = next((line for line in reversed(output.splitlines()) if line.strip()), "")
        return Result("doctor", exit_code == Exit.OK, f"doctor: {last}", exit_code, doc, report, None, None, output)

    def close(self) -> None:
        """Stop everything this home runs (`checkpoint-tui --home HOME stop`); safe to call twice."""
        if not self._closed:
            self._closed = True
            self._stop()

    def _front(
        self, worker_cmd: WorkerCmd | None, task_queue: str | None, workers: Iterable[tuple[str, WorkerCmd]],
        framework: str | None = None,
    ) -> list[str]:  # fmt: skip
        """The global flags: home, server, queue, the worker command(s), the framework."""
        front = ["--home", str(self.home)] + _opt("--temporal-address", self.temporal_address)
        front += _opt("--task-queue", task_queue or self.task_queue) + _opt("--framework", framework)
        front += _opt("--worker-cmd", None if worker_cmd is None else self.command_line(worker_cmd))
        for queue, cmd in workers:
            front += ["--worker", f"{queue}={self.command_line(cmd)}"]
        return front

    def command_line(self, cmd: WorkerCmd) -> str:
        """A worker command as the CLI takes it; a bare `python`/`python3` is this interpreter (the
        test's own environment, where the worker's packages are)."""
        argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
        if argv and argv[0] in PYTHONS:
            argv[0] = self.python
        return shlex.join(argv)

    def _run(self, front: list[str], words: list[str]) -> tuple[int, str]:
        """Run the CLI; (exit code, its output). Exit 2 or 3 raises LabError with its one line; a
        timeout or an interrupt ends it (SIGTERM, then SIGKILL) and stops the home's processes."""
        if self._closed:
            raise LabError("this lab is closed", Exit.USAGE)
        self._out.mkdir(exist_ok=True)
        argv = [self.python, "-m", "checkpoint_tui", *front, *words]
        with self._lock:
            proc = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    start_new_session=True)  # fmt: skip
            try:
                output, _ = proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                _end(proc)
                self._stop()
                raise LabError(f"{words[0]} did not finish in {self.timeout_s:g} s (stopped)", Exit.FAILED) from None
            except BaseException:  # KeyboardInterrupt too: nothing of the run is left behind
                _end(proc)
                self._stop()
                raise
        output = output[-MAX_OUTPUT:]
        if proc.returncode not in (Exit.OK, Exit.FAILED):
            lines = [line for line in output.splitlines() if line.startswith("checkpoint-tui:")] or output.splitlines()
            raise LabError((lines[-1] if lines else f"exit {proc.returncode}")[:1000], proc.returncode)
        return proc.returncode, output

    def _stop(self) -> None:
        argv = [self.python, "-m", "checkpoint_tui", "--home", str(self.home), "stop"]
        subprocess.run(argv, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120, check=False)  # fmt: skip


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM the command (chaos writes its report and stops what it started), SIGKILL its group if
    it is still there after TERM_GRACE_S."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=TERM_GRACE_S)
        return
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError, PermissionError):  # not reaped yet: the group is still its
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _opt(flag: str, value: str | None) -> list[str]:
    return [] if value is None else [flag, value]


def _json_input(value: object) -> str | None:
    """A workflow input: a str is taken as JSON text already; anything else is encoded."""
    return value if value is None or isinstance(value, str) else json.dumps(value)


def _report(path: Path, exit_code: int, output: str) -> dict:
    """The report the command wrote; a command that wrote none failed to run the experiment."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_REPORT + 1)
        doc = json.loads(data) if len(data) <= MAX_REPORT else None
    except (OSError, ValueError):
        doc = None
    if not isinstance(doc, dict):
        tail = " | ".join(output.strip().splitlines()[-3:])[:1000]
        raise LabError(f"no report at {path} (exit {exit_code}): {tail}", exit_code or Exit.FAILED)
    return doc
