"""A user's workflow: the lab runs the example project's own worker (examples/user_worker), kills it
on a schedule, and audits its effects with and without the effects library. Real dev servers, real
worker processes, both ledger backends."""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections import Counter
from itertools import count
from pathlib import Path

import psutil

from conftest import queue_of, run_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_worker" / "worker.py"
WORKER_CMD = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}"
_homes = count()


def lab_flags(home: Path, ledger: str | None = None, address: str | None = None) -> list[str]:
    """The example's worker as the home's worker command; `address`: a server the home did not start."""
    flags = ["--home", str(home), "--worker-cmd", WORKER_CMD, "--task-queue", queue_of("uw", home)]
    flags += ["--temporal-address", address] if address else []
    return flags + (["--ledger", ledger] if ledger else [])


def started_for(home: Path) -> list[psutil.Process]:
    """Live processes started with this home's CHECKPOINT_HOME (the example's worker command does not
    name the home on its command line, so conftest's leftover check cannot see it)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get("CHECKPOINT_HOME") == str(home) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def stop_lab(home: Path) -> None:
    """`stop` the home (its worker command and dev server), then prove nothing of it is left."""
    run_cli("--home", str(home), "stop")
    deadline = time.monotonic() + 10
    while (left := started_for(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for proc in left:  # ours: started with this test's home; stop it before failing
        proc.kill()
    assert not left, f"left running: {[p.pid for p in left]}"


def output_lines(home: Path, run_id: str) -> list[str]:
    return (home / "example-out" / f"{run_id}.txt").read_text().splitlines()


def test_unguarded_example_is_reported_at_risk_and_duplicates_where_the_audit_said(session_root):
    home = session_root / f"uw-unguarded-{next(_homes)}"
    home.mkdir(parents=True)
    schedule = home / "schedule.json"  # kills well inside the activity: after its append, before it returns
    events = [{"at_step": k, "nemesis": "worker-in-activity", "delay_ms": 250} for k in (2, 4, 6)]
    schedule.write_text(json.dumps({"steps": 8, "seed": 7, "events": events}))
    report_path = home / "chaos.json"
    try:
        out = run_cli(
            *lab_flags(home),
            "chaos",
            "--workflow",
            "SendLinesUnguarded",
            "--input",
            '{"count": 8, "pace": 0.4}',
            "--schedule",
            str(schedule),
            "--json",
            str(report_path),
            timeout=240,
        )
        report = json.loads(report_path.read_text())
    finally:
        stop_lab(home)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    run_id, audit = report["run_id"], report["audit"]
    assert audit["workflow_status"] == "COMPLETED" and audit["effects"] == 0
    at_risk = {int(r["activity_id"]) for r in audit["at_risk"]}
    assert at_risk and at_risk == {int(r["activity_id"]) for r in audit["re_executed"]}
    assert all(r["attempt"] >= 2 and not r["guarded"] for r in audit["at_risk"])
    assert "AT RISK" in out.stdout and "verdict: FAIL" in out.stdout
    # the example's own output file: every line there, and each line sent twice was predicted at risk
    lines = Counter(output_lines(home, run_id))
    assert set(lines) == {f"{run_id} line {i}" for i in range(1, 9)}
    twice = {int(line.rsplit(" ", 1)[1]) for line, n in lines.items() if n > 1}
    assert twice and twice <= at_risk, (twice, at_risk)


def test_user_workflow_flags_are_checked_before_anything_starts(tmp_path, capsys):
    from checkpoint_tui.cli import run

    home = tmp_path / "never"
    bad = [
        ["--worker-cmd", "", "start", "--workflow", "SendLines"],
        ["--worker-cmd", "/nonexistent/worker --x", "start", "--workflow", "SendLines"],
        ["--worker-cmd", 'python "unclosed', "start", "--workflow", "SendLines"],
        ["--worker-cmd", "x" * 5000, "start", "--workflow", "SendLines"],
        ["--task-queue", "no spaces allowed", "status"],
        ["--worker-cmd", WORKER_CMD, "start", "--workflow", "Send Lines!"],
        ["--worker-cmd", WORKER_CMD, "start", "--workflow", "SendLines", "--input", "{not json"],
        ["--worker-cmd", WORKER_CMD, "start", "--workflow", "SendLines", "--input", "NaN"],
        ["--worker-cmd", WORKER_CMD, "start", "--workflow", "SendLines", "--input", "[" * 100_000],
        ["--worker-cmd", WORKER_CMD, "start", "--workflow", "SendLines", "--input", json.dumps("x" * 70_000)],
        # valid JSON, but 985 deep: refused before anything starts, not a traceback while encoding it (#25.9)
        ["--worker-cmd", WORKER_CMD, "start", "--workflow", "SendLines", "--input", "[" * 985 + "]" * 985],
        # an output that cannot be written is refused before the run, not after it (#25.10)
        ["chaos", "--json", str(tmp_path)],
        ["--verify", "--json", str(tmp_path)],
        ["--worker-cmd", WORKER_CMD, "chaos", "--workflow", "SendLines", "--json", str(tmp_path)],
        # a user's workflow has no steps: events land on activity starts (--aim), no span is guessed
        ["--worker-cmd", WORKER_CMD, "chaos", "--workflow", "SendLines", "--input", "{}", "--steps", "12"],
        ["--worker-cmd", WORKER_CMD, "chaos", "--workflow", "SendLines", "--aim", ""],
        ["--worker-cmd", WORKER_CMD, "chaos", "--workflow", "SendLines", "--aim", "tool\x1b[2J"],
        ["--worker-cmd", WORKER_CMD, "chaos", "--workflow", "SendLines", "--aim", "x" * 200],
        ["--worker-cmd", WORKER_CMD, "--framework", "langchain", "chaos", "--workflow", "SendLines"],
        # --framework classifies a user's workflow: refused for our loop's run; status and doctor RUN take
        # it (and the declarations) without --worker-cmd, for the runs they read (#51 item 5)
        ["--framework", "pydantic-ai", "start"],
        ["--tool-activities", "send_*", "chaos"],
        ["chaos", "--aim", "tool"],  # --aim and --strict-models are for a user's workflow
        ["chaos", "--strict-models"],
        ["start", "--workflow", "SendLines"],  # --workflow without --worker-cmd
        ["--worker-cmd", WORKER_CMD, "start", "--steps", "3"],  # our own workflow on a user's worker
        ["--worker-cmd", WORKER_CMD, "start", "--workflow", "SendLines", "--fault", "garble:1"],
        ["--worker-cmd", WORKER_CMD, "compare"],
        ["--worker-cmd", WORKER_CMD, "--verify"],  # --verify on a user's worker needs --workflow
        # a proof bundle is for our own workflow: refused, not silently ignored
        ["--worker-cmd", WORKER_CMD, "--verify", "--workflow", "SendLines", "--proof", str(tmp_path / "p")],
    ]
    for argv in bad:
        try:
            code = run(["--home", str(home), *argv])
        except SystemExit as exit_:  # the parser's own one-line errors
            code = exit_.code
        err = capsys.readouterr().err
        assert code == 2, (argv[:4], err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    schedule = tmp_path / "ours-only.json"  # a nemesis of our own loop's, in a file: the error names both
    schedule.write_text(json.dumps({"steps": 8, "events": [{"at_step": 3, "nemesis": "forge-duplicate-email"}]}))
    code = run(
        [
            "--home",
            str(home),
            "--worker-cmd",
            WORKER_CMD,
            "chaos",
            "--workflow",
            "SendLines",
            "--schedule",
            str(schedule),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{schedule}: the event at step 3 is forge-duplicate-email" in err, err
    out = run_cli("--home", str(home), "--worker-cmd", "/nonexistent/worker", "start", "--workflow", "SendLines")
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr  # as a user sees it: one line, exit 2
    assert not home.exists()  # nothing was created, let alone started


async def test_the_app_on_a_user_workflow_and_k_kills_the_users_worker(session_root, temporal_address):
    from checkpoint_tui.core.session import LabSession
    from checkpoint_tui.core.workflow_runs import start_workflow_run
    from checkpoint_tui.ops.temporal import connect_client
    from checkpoint_tui.ops.user_polling import pollers
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.tui.app import CheckpointApp
    from checkpoint_tui.workloads import AgentLoopWorkload
    from test_tui_live import SIZE, cell_text, wait_for

    home = Settings(
        home=session_root / f"uw-app-{next(_homes)}",
        temporal_address=temporal_address,
        task_queue_name=f"uw-app-{next(_homes)}",
        worker_cmd=(sys.executable, str(EXAMPLE)),
        worker_cwd=EXAMPLE.parent,
    )
    home.ensure_dirs()
    client = await connect_client(home, temporal_address)
    run_id = await start_workflow_run(home, client, "SendLines", {"count": 12, "pace": 0.3})  # the app opens on it
    session = LabSession(home, AgentLoopWorkload())
    app = CheckpointApp(session, poll_interval=0.1)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: session.supervisor is not None and session.run_id == run_id, what="boot")
            first = session.supervisor.primary
            timeline = app.query_one("#timeline")
            await wait_for(pilot, lambda: timeline.row_count >= 2, what="activities in the timeline")
            assert cell_text(timeline, "1", "provider") == "send_line"  # a row per activity execution
            assert cell_text(timeline, "1", "pid") == str(first.pid)  # the SDK's default identity pid@host
            await pilot.press("k")
            await wait_for(
                pilot,
                lambda: (w := session.supervisor.primary) is not None and w.pid != first.pid,
                what="a replacement",
            )  # (no primary at all for a moment in between)
            assert not first.ident.exists()  # the user's worker process is gone
            new = session.supervisor.primary
            ids: set[str] = set()

            async def polls() -> bool:
                ids.update(await pollers(client, home))
                return new.name in ids

            deadline = time.monotonic() + 30
            while not await polls():
                assert time.monotonic() < deadline, "the replacement never polled"
                await pilot.pause(0.1)
            await wait_for(
                pilot,
                lambda: "COMPLETED" in str(app.query_one("#history").names),
                timeout=60,
                what="the workflow completed",
            )
            shown = lambda: timeline.row_count == 12 and cell_text(timeline, "12", "status") == "completed"  # noqa: E731
            await wait_for(pilot, shown, what="every activity shown")
            marks = [k for k in timeline.row_keys() if "resumed" in cell_text(timeline, k, "mark")]
            assert marks, "the activity after the kill ran on another worker"
            assert all(cell_text(timeline, k, "pid") == str(new.pid) for k in marks)
            info = app.query_one("#ledger-info")
            await wait_for(pilot, lambda: "12 rows" in info.plain, what="the library's effects in the ledger pane")
            assert "duplicates 0" in info.plain
    finally:
        await session.shutdown(stop_everything=True)
    lines = Counter(output_lines(home.home, run_id))
    assert lines == Counter(f"{run_id} line {i}" for i in range(1, 13))
    assert not started_for(home.home)


def test_stop_ends_what_a_worker_command_daemonized(session_root, temporal_address):
    """#39: a worker command that forks a daemon into a session of its own: the process group `stop`
    ends no longer holds it, and it kept running with this home's CHECKPOINT_HOME after `stop`."""
    home = session_root / "daemonizing"
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).parent / 'daemonizing_worker.py'))}"
    flags = [
        "--home",
        str(home),
        "--temporal-address",
        temporal_address,
        "--worker-cmd",
        cmd,
        "--task-queue",
        queue_of("uw", home),
    ]
    try:
        out = run_cli(*flags, "start", "--workflow", "SendLines", "--input", '{"count": 1, "pace": 0}', "--wait")
        assert out.returncode == 0, out.stderr[-2000:]
        daemons = [p for p in started_for(home) if "daemonizing_worker.py" in " ".join(p.cmdline())]
        assert daemons, [p.cmdline() for p in started_for(home)]  # the worker exec'd; its daemon did not
    finally:
        stop_lab(home)  # proves nothing started for the home is left, the daemon included
