"""`checkpoint-tui replay`: histories of a run that continued as new under a SIGKILL and a crash in the
claim window replay on the workflow code of this checkout, from Temporal and from exported files with
no server; workflow variants that changed the activity order or added a timer fail, naming the
diverging event."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from junitparser import JUnitXml
from temporalio import workflow

from checkpoint_tui import cli
from checkpoint_tui.core.runs import new_run_id, wait_for_run
from checkpoint_tui.core.workflow_runs import start_workflow_run
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.faults import FaultSpec, add_fault
from checkpoint_tui.ledger.store import connect, create_run
from checkpoint_tui.loop_worker.activities import AgentActivities
from checkpoint_tui.loop_worker.shared import AgentInput, AgentResult
from checkpoint_tui.loop_worker.workflow import AgentLoop
from checkpoint_tui.proof.replay.command import Selection, replay_command
from checkpoint_tui.settings import Settings
from conftest import run_cli

STEPS, PER_RUN = 10, 4  # three executions: steps 1-4, 5-8, 9-10


# Registered under the workflow's own name, as a changed checkout would be. Not sandboxed: the
# sandbox would re-import this test module.
@workflow.defn(name="AgentLoop", sandboxed=False)
class SwappedBookkeeping(AgentLoop):
    """A change of activity order: each step marks itself completed before running."""

    async def _bookkeeping(self, inp, method, step_input) -> None:
        swap = {
            AgentActivities.mark_step_running: AgentActivities.mark_step_completed,
            AgentActivities.mark_step_completed: AgentActivities.mark_step_running,
        }
        await super()._bookkeeping(inp, swap.get(method, method), step_input)

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        return await super().run(inp)


@workflow.defn(name="AgentLoop", sandboxed=False)
class ExtraTimer(AgentLoop):
    """A changed pause: a short timer before each step is marked completed (durations alone are not
    compared on replay; a timer where history has an activity is)."""

    async def _bookkeeping(self, inp, method, step_input) -> None:
        if method is AgentActivities.mark_step_completed:
            await workflow.sleep(timedelta(milliseconds=1))
        await super()._bookkeeping(inp, method, step_input)

    @workflow.run
    async def run(self, inp: AgentInput) -> AgentResult:
        return await super().run(inp)


def fail_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("FAIL")]


async def user_workflow_run(home: Settings, client) -> str:
    """A run of a user's workflow as `--worker-cmd ... start --workflow SendLines` records it (ledger row
    `workflow:SendLines`, a real workflow in Temporal), on a queue nobody polls, then terminated: a real
    history that AgentLoop cannot replay."""
    run_id = await start_workflow_run(
        replace(home, task_queue_name=f"{home.task_queue}-uw"), client, "SendLines", {"count": 2}
    )
    await client.get_workflow_handle(run_id).terminate("test: a user workflow history, never run")
    return run_id


async def test_chain_with_kills_replays_and_changed_code_fails(home, client, supervisor, tmp_path, capsys):
    conn = connect(home.db_path)
    run_id = new_run_id()
    create_run(conn, run_id, STEPS, 0.05, "offline", home.task_queue)  # no first_execution: read from Temporal
    add_fault(conn, run_id, FaultSpec("kill_at", 3))  # the supervisor SIGKILLs the worker mid-activity
    add_fault(conn, run_id, FaultSpec("crash_after_claim", 6, effect_kind="email"))
    await client.start_workflow(
        "AgentLoop", AgentInput(run_id, STEPS, 0.05, steps_per_run=PER_RUN), id=run_id, task_queue=home.task_queue
    )
    assert await wait_for_run(home, client, run_id, timeout=120) == "COMPLETED"
    assert {"kill", "died"} <= {e["event"] for e in queries.death_events(conn, run_id)}  # both fired

    corpus, junit = tmp_path / "corpus", tmp_path / "replay.xml"
    out = run_cli("replay", run_id, "--export", str(corpus), "--junit", str(junit), home=home, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    for n in (1, 2, 3):
        assert f"PASS  replay {run_id}.0{n}" in out.stdout
    assert "REPLAY PASS — 3/3" in out.stdout
    files = sorted(p.name for p in corpus.iterdir())
    assert files == [f"{run_id}.0{n}.json" for n in (1, 2, 3)]
    first = json.loads((corpus / files[0]).read_text())
    assert first["events"][-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
    assert JUnitXml.fromfile(str(junit)).tests == 3

    # A run of a user's workflow in the same ledger: --all replays ours and skips it with a note; named,
    # it is a usage error (exit 2) before anything is replayed.
    user_run = await user_workflow_run(home, client)
    every = run_cli("replay", "--all", home=home, timeout=90)
    assert every.returncode == 0, every.stdout + every.stderr
    skip = [line for line in every.stdout.splitlines() if line.startswith(f"skip  {user_run}:")]
    assert len(skip) == 1 and "your own workflow SendLines" in skip[0] and "--verify --workflow SendLines" in skip[0]
    assert "REPLAY PASS — 3/3" in every.stdout and not fail_lines(every.stdout)
    named = run_cli("replay", run_id, user_run, home=home)
    assert named.returncode == 2 and "PASS" not in named.stdout
    assert named.stderr.count("\n") == 1 and "--verify --workflow SendLines" in named.stderr

    # Without a server: an unreachable address, a home with nothing in it.
    nowhere = tmp_path / "empty-home"
    offline = run_cli("--home", str(nowhere), "--temporal-address", "127.0.0.1:9", "replay", "--from", str(corpus))
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert "REPLAY PASS — 3/3" in offline.stdout and not (nowhere / "run").exists()

    # A history file of another workflow type under --from (a user's): skipped with a note, not failed.
    theirs = tmp_path / "their-corpus"
    theirs.mkdir()
    first = sorted(corpus.glob("*.json"))[0]
    data = json.loads(first.read_text())
    data["events"][0]["workflowExecutionStartedEventAttributes"]["workflowType"]["name"] = "SendLines"
    (theirs / first.name).write_text(json.dumps(data))
    other = run_cli("--home", str(nowhere), "--temporal-address", "127.0.0.1:9", "replay", "--from", str(theirs))
    assert other.returncode == 0, other.stdout + other.stderr
    assert "a history of workflow SendLines, not AgentLoop" in other.stdout and "nothing to replay" in other.stdout

    # Changed workflow code, through the same command's seam (the class is a parameter).
    settings = Settings(home=nowhere)
    capsys.readouterr()
    swapped_xml = tmp_path / "swapped.xml"
    assert await replay_command(settings, Selection(from_path=corpus), None, swapped_xml, SwappedBookkeeping) == 1
    swapped = capsys.readouterr().out
    assert len(fail_lines(swapped)) == 3 and "REPLAY FAILED — 3/3" in swapped
    line = next(x for x in fail_lines(swapped) if f"{run_id}.01" in x)
    assert "Nondeterminism" in line and "'mark_step_running' does not match" in line
    assert "first diverging event: 5 ACTIVITY_TASK_SCHEDULED mark_step_running" in line  # step 1's first activity
    parsed = JUnitXml.fromfile(str(swapped_xml))
    assert (parsed.tests, parsed.failures) == (3, 3)

    assert await replay_command(settings, Selection(from_path=corpus), workflow=ExtraTimer) == 1
    timer = capsys.readouterr().out
    line = next(x for x in fail_lines(timer) if f"{run_id}.01" in x)
    assert "Timer machine does not handle this event: HistoryEvent(id: " in line
    event_id = int(line.split("HistoryEvent(id: ")[1].split(",")[0])
    assert f"first diverging event: {event_id} ACTIVITY_TASK_SCHEDULED mark_step_completed" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["replay"],  # nothing chosen
        ["replay", "--all", "--from", "."],  # two sources
        ["replay", "not-a-run-id"],
        ["replay", "--from", "/nonexistent/corpus"],
        ["replay", "--all", "--junit", "/"],  # a directory, not a file
        ["--junit", "x.xml", "status"],  # the top-level --junit goes with --verify
        ["chaos", "--proof", "/dev/null"],  # exists and is not a directory
    ],
)
def test_bad_replay_and_proof_flags_exit_2_before_anything_starts(argv, tmp_path, capsys):
    try:
        code = cli.run(["--home", str(tmp_path / "h"), *argv])
    except SystemExit as stop:
        code = stop.code
    assert code == 2
    assert not (tmp_path / "h").exists()
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_from_a_directory_without_histories_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "report.json").write_text('{"passed": 1}')
    assert cli.run(["--home", str(tmp_path / "h"), "replay", "--from", str(tmp_path)]) == 2
    assert "no history files" in capsys.readouterr().err


def test_unreadable_history_file_fails(tmp_path, capsys):
    corpus = Path(tmp_path / "corpus")
    corpus.mkdir()
    (corpus / "run-20261130-000000-abcd.01.json").write_text('{"events": [{"eventType": "NOT_A_TYPE"}]}')
    assert cli.run(["--home", str(tmp_path / "h"), "replay", "--from", str(corpus)]) == 1
    assert "FAIL  replay run-20261130-000000-abcd.01.json" in capsys.readouterr().out


def test_user_workflow_runs_only_nothing_is_started(tmp_path, capsys):
    """A home whose only run is of a user's workflow: --all skips it and starts no server; named: exit 2."""
    home = Settings(home=tmp_path / "h")
    home.ensure_dirs()
    run_id = new_run_id()
    # as start_workflow_run does
    create_run(connect(home.ledger), run_id, 0, 0.0, None, "user-worker-example", "workflow", "SendLines")
    assert cli.run(["--home", str(home.home), "replay", "--all"]) == 0
    out = capsys.readouterr().out
    assert f"skip  {run_id}: a run of your own workflow SendLines" in out
    assert "nothing to replay" in out and not (home.run_dir / "devserver.json").exists()
    assert cli.run(["--home", str(home.home), "replay", run_id]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{run_id} is a run of your own workflow SendLines" in err[0]
    assert not (home.run_dir / "devserver.json").exists()
