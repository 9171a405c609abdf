"""`checkpoint-tui replay`: recorded histories (every execution of each run's continue-as-new chain)
replayed against the workflow code of this checkout, the CI gate for workflow changes that would
break runs in flight. A failure prints the SDK's message and the first diverging event. Each history
is replayed in a child process under a deadline (replay_box.py): a history that makes the SDK hang or
panic is a failure of its own, and the rest of the corpus still runs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from checkpoint_tui.core.workload import Workload
from checkpoint_tui.errors import Failed, UsageError
from checkpoint_tui.files import OutputDir
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.rows import RunRow
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.workflow import AgentLoop
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.proof.junit import write_junit
from checkpoint_tui.proof.replay.box import REPLAY_DEADLINE_S, ReplayBox
from checkpoint_tui.proof.replay.histories import (
    NoHistory,
    Recorded,
    Unreadable,
    export,
    fetch_chain,
    load_each,
    replay_problem,
)
from checkpoint_tui.proof.replay.replayer import Divergence
from checkpoint_tui.proof.report import Report
from checkpoint_tui.settings import Settings


@dataclass(frozen=True)
class Outcome:
    name: str  # the history's name (<run>.<NN>), also its export file's stem
    execution: str
    events: int
    seconds: float
    error: str | None = None  # the SDK's non-determinism (or other replay failure) message
    divergence: Divergence | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def observed(self) -> str:
        head = f"execution {self.execution} · {self.events} events · {self.seconds:.2f}s"
        if self.ok:
            return head
        where = f"{self.divergence.event_id} {self.divergence.event}" if self.divergence else "not located"
        return f"{head} · {self.error} · first diverging event: {where}"


@dataclass(frozen=True)
class Selection:
    """What to replay: named runs, every run of the ledger, or history files (no server needed)."""

    run_ids: tuple[str, ...] = ()
    all_runs: bool = False
    from_path: Path | None = None

    def check(self) -> None:
        chosen = sum((bool(self.run_ids), self.all_runs, self.from_path is not None))
        if chosen != 1:
            raise UsageError("replay takes RUN_ID ..., --all or --from DIR (exactly one of them)")
        if self.from_path is not None and not self.from_path.exists():
            raise UsageError(f"--from {self.from_path}: no such file or directory")


def outcome(box: ReplayBox, rec: Recorded) -> Outcome:
    problem = replay_problem(rec.history)
    if problem is not None:
        return Outcome(rec.name, rec.execution, len(rec.history.events), 0.0, f"not replayable: {problem}")
    answer = box.answer(rec.history)
    return Outcome(rec.name, rec.execution, len(rec.history.events), answer.seconds, answer.error, answer.divergence)


class Replaying:
    """One history at a time, each exported (--export) and replayed as soon as it is read, so a corpus
    or a home's runs never sit in memory together; the child process and the export directory are
    opened with the first history."""

    def __init__(self, workflow: type, deadline_s: float, export_dir: Path | None, report: Report) -> None:
        self.workflow, self.report, self.export_dir = workflow, report, export_dir
        self.box = ReplayBox(workflow, deadline_s)
        self._stack = contextlib.ExitStack()
        self._out: OutputDir | None = None
        self.exported = 0

    def __enter__(self) -> Replaying:
        self._stack.enter_context(self.box)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def one(self, rec: Recorded) -> None:
        if not _only_ours([rec], self.workflow):
            return
        if self.export_dir is not None:
            if self._out is None:
                self._out = self._stack.enter_context(OutputDir(self.export_dir, "--export"))
            self.exported += len(export([rec], self._out))
        done = outcome(self.box, rec)
        self.report.check(
            f"replay {done.name}",
            done.ok,
            done.observed,
            events=done.events,
            event_id=done.divergence.event_id if done.divergence else None,
        )

    def files(self, source: Path) -> bool:
        """Every file under `source`; False if none of them claims to be a history."""
        found = False
        for item in load_each(source):
            if isinstance(item, Path):
                print(f"skip  {item}: JSON, but not a history")
            elif isinstance(item, Unreadable):
                found = True
                self.report.check(f"replay {item.path.name}", False, item.reason)
            else:
                found = True
                self.one(item)
        return found


async def replay_command(
    settings: Settings,
    selection: Selection,
    export_dir: Path | None = None,
    junit_path: Path | None = None,
    workflow: type = AgentLoop,
    deadline_s: float = REPLAY_DEADLINE_S,
    of_run: Callable[[RunRow], Workload] | None = None,
) -> int:
    """Prints PASS/FAIL per history; exit 1 if any failed (or could not be read, or hung past
    `deadline_s`), else 0. `of_run`: the workload a recorded run is (runs of another workflow than ours
    are skipped, or refused when named)."""
    selection.check()
    started = time.monotonic()
    report = Report()
    with Replaying(workflow, deadline_s, export_dir, report) as replaying:
        if selection.from_path is not None:
            if not await asyncio.to_thread(replaying.files, selection.from_path):
                raise UsageError(f"--from {selection.from_path}: no history files (JSON with an 'events' list)")
        else:
            await _from_temporal(settings, selection, report, replaying, of_run)
    if export_dir is not None:
        print(f"exported {replaying.exported} histories to {export_dir}")
    total, failed = len(report.checks), len(report.failures)
    if not total:
        print("nothing to replay: no history of checkpoint-tui's workflow among this home's runs")
    elif failed:
        print(f"REPLAY FAILED — {failed}/{total} histories do not replay on this checkout's workflow code")
    else:
        print(f"REPLAY PASS — {total}/{total} histories replay on this checkout's workflow code")
    if junit_path is not None:
        write_junit(junit_path, "checkpoint-tui replay", report.checks, time_s=time.monotonic() - started)
        print(f"wrote {junit_path}")
    return 1 if failed else 0


def _only_ours(recorded: list[Recorded], workflow: type) -> list[Recorded]:
    """Files of another workflow type (a user's, under --worker-cmd) are skipped with a note: replayed
    against ours they could only fail, and say nothing about either."""
    ours = getattr(workflow, "__temporal_workflow_definition").name
    kept = []
    for rec in recorded:
        events = rec.history.events
        start = events[0].workflow_execution_started_event_attributes if events else None
        kind = start.workflow_type.name if start is not None else ""
        if kind and kind != ours:
            print(f"skip  {rec.name}: a history of workflow {kind}, not {ours}: replay it against its own code")
        else:
            kept.append(rec)
    return kept


async def _from_temporal(
    settings: Settings,
    selection: Selection,
    report: Report,
    replaying: Replaying,
    of_run: Callable[[RunRow], Workload] | None,
) -> None:
    conn = connect(settings.ledger) if settings.ledger_exists else None
    if conn is None and selection.run_ids and settings.embedded:  # no runs, so no dev server worth starting
        raise UsageError(f"no run {selection.run_ids[0]!r}: {settings.home} has no ledger yet")
    run_ids = list(selection.run_ids) or (queries.run_ids(conn) if conn is not None else [])
    if conn is not None:
        assert of_run is not None, "replaying recorded runs needs to know each run's workload"
        run_ids = ours(conn, run_ids, bool(selection.run_ids), of_run)
    if not run_ids:
        return
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    for run_id in run_ids:  # one run's chain in memory at a time
        for rec in await chains(client, [run_id], conn, report, strict=not selection.all_runs):
            await asyncio.to_thread(replaying.one, rec)


def ours(conn, run_ids: list[str], named: bool, of_run: Callable[[RunRow], Workload]) -> list[str]:
    """The runs of checkpoint-tui's own workflow. A run of a user's workflow (`--worker-cmd ... start
    --workflow`) would only fail against AgentLoop: with --all it is skipped with a note; named, it is
    a usage error (exit 2) before anything starts."""
    kept = []
    for run_id in run_ids:
        row = queries.run(conn, run_id)
        try:
            note = of_run(row).replay_note() if row is not None else None
        except Failed as err:  # a run of a workload this version does not know (a newer host wrote it)
            note = str(err)
        if note is None:
            kept.append(run_id)
        elif named:
            raise UsageError(f"{run_id} is {note}")
        else:
            print(f"skip  {run_id}: {note}")
    return kept


def user_workflow_note(workflow: str) -> str:
    return (
        f"a run of your own workflow {workflow}, which checkpoint-tui's AgentLoop cannot replay; "
        f"--worker-cmd CMD --verify --workflow {workflow} --input JSON replays your workflow's histories "
        "on your worker's own code"
    )


async def chains(client: Client, run_ids: list[str], conn, report: Report | None, strict: bool) -> list[Recorded]:
    """Every execution of each run. A run Temporal does not know is a failure when it was named
    (`strict`), else a skip (a ledger can outlive the server's retention)."""
    recorded: list[Recorded] = []
    for run_id in run_ids:
        row = queries.run(conn, run_id) if conn is not None else None
        try:
            recorded += await fetch_chain(client, run_id, row.first_execution if row else None)
        except NoHistory as err:
            if strict and report is not None:
                report.check(f"replay {run_id}", False, str(err))
            else:
                print(f"skip  {run_id}: {err}")
    return recorded
