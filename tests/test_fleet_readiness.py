"""Game day's rollouts wait for readiness, as a kubelet does (#51 item 3): a graceful restart stops a
worker only once Temporal lists it as a poller, so restarts back to back never stop a replacement that
has not polled yet (it had: four restarts all at the run's activity 10, no progress between them)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.user_polling import pollers, wait_recorded
from checkpoint_tui.proof.nemeses.fleet import graceful_restart
from checkpoint_tui.proof.nemeses.records import Hit
from checkpoint_tui.settings import Settings
from conftest import supervised

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_worker" / "worker.py"


async def test_restarts_back_to_back_each_stop_a_worker_that_polled_and_the_run_moves_between_them(
    home: Settings, tmp_path: Path, temporal_address: str
):
    settings = replace(
        home, worker_cmd=(sys.executable, str(EXAMPLE)), worker_cwd=tmp_path, task_queue_name=f"ready-{home.home.name}"
    )
    async with supervised(settings, temporal_address) as (sup, client):
        handle = await client.start_workflow(
            "SendLines", {"count": 12, "pace": 0.2}, id=f"ready-{home.home.name}", task_queue=settings.task_queue
        )
        stopped = []
        for _ in range(4):  # each as soon as the slot has a worker again: it waits for its victim to poll
            await wait_recorded(settings, 0)
            hit = await graceful_restart(settings, None, 5.0, client)
            assert isinstance(hit, Hit), hit
            stopped.append(hit.detail)
        await handle.result()
    assert len({d["pid"] for d in stopped}) == 4
    assert all(d["polled_after_s"] is not None and not d["killed_after_grace"] for d in stopped), stopped
    assert all(f"{d['pid']}@" in d["identity"] for d in stopped)
    # the run went on between the restarts: the activities in flight at each SIGTERM were not all one
    events = queries.worker_events(connect(settings.ledger), None, 200)
    sigterms = sorted(e.at for e in events if e.event == "sigterm")
    assert len(sigterms) == 4 and sigterms[-1] - sigterms[0] > 0.5
    assert await pollers(client, settings)  # a worker still polls after the last restart
