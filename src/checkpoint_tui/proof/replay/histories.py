"""Recorded Temporal histories: every execution of a run's continue-as-new chain read from Temporal,
and the JSON files a team commits as a replay corpus. The files are what `temporal workflow show
--output json` writes and `WorkflowHistory.from_json` reads (`{"events": [...]}`); the name carries
the workflow id, which the JSON does not: `<run id>.<NN>.json` is execution NN of that run's chain,
any other `<name>.json` the history of workflow `<name>`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client, WorkflowHistory

from checkpoint_tui.core.chain import continued_as_new, read_chain
from checkpoint_tui.errors import UsageError
from checkpoint_tui.files import HISTORY_LIMIT, OutputDir, read_json_file

SOURCE_TEMPORAL = "temporal"
MIN_EVENTS = 2  # WORKFLOW_EXECUTION_STARTED + its first WORKFLOW_TASK_SCHEDULED (core panics on less)
# Events in one history file: an execution of our workflow holds ~35 a step and continues as new every
# 25 steps (~900). Parsed into protobuf and replayed, each costs time and memory its JSON does not
# show: 10,000 of the costliest kind MAX_ITEMS allows take ~3.5 s and ~150 MB; 51,200 (Temporal's
# own limit) took 5.5 s and 260 MB.
MAX_EVENTS = 10_000
_NAME = re.compile(r"(?P<workflow_id>.+)\.(?P<index>\d{2,})")


@dataclass(frozen=True)
class Recorded:
    """One execution's history and where it came from."""

    workflow_id: str
    index: int  # position in the continue-as-new chain, 1 = the first execution
    history: WorkflowHistory
    source: str  # SOURCE_TEMPORAL, or the file it was read from

    @property
    def name(self) -> str:
        """Also the stem of its exported file."""
        return f"{self.workflow_id}.{self.index:02d}"

    @property
    def execution(self) -> str:
        """Temporal's run id of this execution (from its first event)."""
        try:
            return self.history.run_id
        except Exception:  # a file without a started event
            return "?"


@dataclass(frozen=True)
class Unreadable:
    """A file under --from that claims to be a history but does not parse (a failure, not a skip)."""

    path: Path
    reason: str


class NoHistory(LookupError):
    """Temporal has no workflow with this id (another server, or past its retention)."""


async def fetch_chain(client: Client, run_id: str, first_execution: str | None = None) -> list[Recorded]:
    """Every execution of the run, first to last: each continue-as-new event names the next one, and an
    execution a reset terminated is followed by the one the reset made (both are histories the code
    must replay). Without `first_execution` (a run the ledger does not know), the latest execution's
    started event names the chain's first."""
    chain = await read_chain(client, run_id, first_execution, max_events=None)  # a replay reads it all
    if chain.missing:
        raise NoHistory(f"Temporal has no history for {run_id}")
    return [
        Recorded(run_id, i + 1, WorkflowHistory(run_id, events), SOURCE_TEMPORAL)
        for i, (_, events) in enumerate(chain.as_read)
    ]


def continued_as(history: WorkflowHistory) -> str | None:
    """The execution this one continued as, if it ended in continue-as-new."""
    return continued_as_new(history.events[-1]) if history.events else None


def export(chains: list[Recorded], directory: Path | OutputDir) -> list[Path]:
    """Each history as `<name>.json` in `directory` (a path, or one a bundle has open already)."""
    if isinstance(directory, OutputDir):
        return [directory.write(f"{rec.name}.json", rec.history.to_json()) for rec in chains]
    with OutputDir(directory, "--export") as out:
        return export(chains, out)


def history_files(source: Path) -> list[Path]:
    """A file, or every *.json under a directory, in name order (so a chain reads first to last). Links
    to directories are not walked into; links, FIFOs and devices named *.json are listed, so that each
    gets its own FAIL line."""
    if not source.is_dir():
        return [source]
    found = []
    for root, _dirs, names in os.walk(source):  # followlinks=False
        found += [Path(root) / n for n in names if n.endswith(".json")]
    return sorted(found)


def load_each(source: Path) -> Iterator[Recorded | Unreadable | Path]:
    """Each file under `source`, read when its turn comes (a corpus is never held in memory whole): a
    history, a file that claims to be one but does not parse, or a JSON file that is not a history.
    A file found in a directory is read without following a link (the user named the directory)."""
    for path in history_files(source):
        yield load_one(path, follow=path == source)


def load_one(path: Path, follow: bool) -> Recorded | Unreadable | Path:
    try:
        data = read_json_file(path, "the history", HISTORY_LIMIT, follow=follow)
    except UsageError as err:
        return Unreadable(path, str(err))
    if not isinstance(data, dict) or not isinstance(data.get("events"), list):
        return path  # e.g. a report.json beside the histories
    if len(data["events"]) > MAX_EVENTS:
        return Unreadable(path, f"{len(data['events'])} events; a history file holds at most {MAX_EVENTS}")
    m = _NAME.fullmatch(path.stem)
    workflow_id, index = (m["workflow_id"], int(m["index"])) if m else (path.stem, 1)
    try:
        history = WorkflowHistory.from_json(workflow_id, data)
    except Exception as err:  # protobuf's ParseError and friends: the file is named in the failure
        return Unreadable(path, f"not a Temporal history: {type(err).__name__}: {err}")
    problem = replay_problem(history)
    if problem is not None:
        return Unreadable(path, f"not a replayable history: {problem}")
    return Recorded(workflow_id, index, history, str(path))


def replay_problem(history: WorkflowHistory) -> str | None:
    """What makes a parsed history unfit to replay (the SDK's core panics on some of them and never
    answers), or None."""
    events = history.events
    if len(events) < MIN_EVENTS:
        return f"{len(events)} event(s); a workflow's history starts with {MIN_EVENTS}"
    if not events[0].HasField("workflow_execution_started_event_attributes"):
        return "its first event is not WORKFLOW_EXECUTION_STARTED"
    ids = [e.event_id for e in events]
    if ids != list(range(1, len(ids) + 1)):
        return "event ids are not 1, 2, 3, ... in order"
    return None
