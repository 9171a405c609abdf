"""The network nemesis: workers reach Temporal through a loopback proxy that adds latency and then
partitions the link for a few seconds; the run completes with every effect exactly once."""

from __future__ import annotations

import time

from checkpoint_tui.core.runs import start_run, wait_for_run
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.supervisor import Supervisor
from checkpoint_tui.proof.nemeses.net_proxy import NetProxy
from checkpoint_tui.waiting import wait_until

PARTITION_S = 3.0


async def test_partition_stalls_the_run_but_loses_and_duplicates_nothing(home, client, temporal_address):
    proxy = NetProxy(temporal_address)
    sup = Supervisor(home, await proxy.start())  # workers and the supervisor's client go through the proxy
    assert sup.acquire()
    conn = connect(home.db_path)
    try:
        sup.ensure_worker()
        async with sup.running(stop_workers=True):
            proxy.latency_s = 0.01
            run_id = await start_run(home, client, steps=6, pace=0.3)
            await wait_until(lambda: queries.activity_logged(conn, run_id, 3, "llm"), 30, what="step 3")
            await proxy.partition(PARTITION_S)
            healed = time.time()
            assert await wait_for_run(home, client, run_id, timeout=60) == "COMPLETED"
    finally:
        await sup.stop(stop_workers=True)
        await proxy.close()
    after = queries.first_activity_after(conn, run_id, healed)
    assert after is not None and after - healed <= 5.0, f"heal -> next activity {after - healed:.2f} s"
    snap = build_snapshot(conn, home, run_id)
    assert snap.duplicates == 0 and snap.outbox_lines == 6 and snap.completed_steps == 6 and snap.notes_rows == 6
    assert proxy.partitions == 1
    print(f"partition {PARTITION_S} s: heal -> next activity {after - healed:.2f} s")
