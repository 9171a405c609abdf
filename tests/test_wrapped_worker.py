"""A worker command run through a wrapper (#50: `--worker-cmd "npm run worker"` exited 3 after 30 s,
blaming the task queue): the lab follows the wrapper to the process that polls, takes its identity for
the readiness check and for assisted failover, and a kill of the wrapper's group reaches it."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import psutil

from checkpoint_tui.core.workflow_runs import start_workflow_run
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.user_polling import wait_polling
from checkpoint_tui.ops.wrappers import is_wrapper, polling_pid
from checkpoint_tui.settings import HOST, Settings
from checkpoint_tui.waiting import wait_until, wait_until_sync
from conftest import supervised

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_worker" / "worker.py"


def test_only_a_wrapper_is_followed():
    assert is_wrapper(["npm", "run", "worker"]) and is_wrapper(["/bin/sh", "-c", "x; y"])
    assert is_wrapper(["npm run worker"])  # npm's node process, retitled: one string
    assert not is_wrapper([sys.executable, "w.py"]) and not is_wrapper(["node", "worker.js"]) and not is_wrapper([])
    assert polling_pid(psutil.Process().pid) == psutil.Process().pid  # not a wrapper: itself


async def test_a_worker_under_sh_is_followed_to_the_python_that_polls_and_failed_over_by_that_name(
    home: Settings, tmp_path: Path, temporal_address: str
):
    # `; exit $?` keeps sh as the parent (a lone command would be exec'd): the wrapper case
    wrapped = ("sh", "-c", f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}; exit $?")
    settings = replace(home, worker_cmd=wrapped, worker_cwd=tmp_path, task_queue_name=f"wrapped-{home.home.name}")
    async with supervised(settings, temporal_address) as (sup, client):
        worker = sup.primary
        assert worker is not None
        await wait_polling(client, settings, worker, timeout=30)  # it had waited for the wrapper's identity
        child = [p for p in psutil.Process(worker.pid).children(recursive=True) if "worker.py" in " ".join(p.cmdline())]
        assert len(child) == 1 and worker.name == f"{child[0].pid}@{HOST}", (worker.name, child)
        run_id = await start_workflow_run(settings, client, "SendLines", {"count": 3, "pace": 2.0})
        handle = client.get_workflow_handle(run_id)

        async def in_flight() -> bool:
            return bool((await handle.describe()).raw_description.pending_activities)

        for _ in range(200):  # an activity of the run running on it
            if await in_flight():
                break
            await wait_until(lambda: True, 0.05)
        await sup.kill(worker=worker)
        assert await handle.result()
    conn = connect(settings.ledger)
    assist = [e for e in queries.worker_events(conn, None, 200) if e.event == "assist" and e.pid == worker.pid]
    assert assist and json.loads(assist[0].detail)["failed_activities"], assist  # matched by the followed name
    assert not psutil.pid_exists(child[0].pid) or psutil.Process(child[0].pid).status() == psutil.STATUS_ZOMBIE


def test_a_wrapper_that_execs_the_rest_keeps_its_identity(tmp_path: Path):
    """`env VAR=1 python w.py` runs on as `python w.py` with env's pid: it was reported as a worker that
    "ended at once", and then as one that was no longer ours. Its identity is taken once it runs, and
    still matches after the exec."""
    import subprocess

    from checkpoint_tui.ops.procs import ProcIdentity
    from checkpoint_tui.ops.user_worker import identity_after_user_exec

    cmd = ["/usr/bin/env", "FOO=1", sys.executable, "-c", "import sys; sys.stdin.read()"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    try:
        ident = identity_after_user_exec(proc.pid, cmd)
        assert ident is not None and ident.pid == proc.pid
        assert wait_until_sync(lambda: ProcIdentity.of(proc.pid).cmdline[0] == sys.executable, 5)  # exec'd
        assert ident.matches_live()  # the same pid and start time, running the end of its command line
        stranger = ProcIdentity(ident.pid, ident.create_time, ("/usr/bin/env", "FOO=1", "other"), ident.start_ticks)
        assert not stranger.matches_live()  # a line it is not the end of: not ours
    finally:
        proc.communicate(timeout=30)
