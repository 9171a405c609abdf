"""`compare`: the naive loop beside the durable one under the same SIGKILL (our loop's lesson, whatever
workload the lab runs)."""

from __future__ import annotations

from checkpoint_tui.core.comparison import read_comparison
from checkpoint_tui.proof.measure.compare import compare_command
from conftest import run_cli


async def test_naive_sends_twice_durable_once(home):
    code = await compare_command(home, steps=5, kill_step=3, pace=0.1)
    c = read_comparison(home)
    assert c is not None
    assert c.naive.repeated >= 1 and c.naive.emails > 5  # the restart re-sent emails 1..3
    assert c.durable.emails == 5 and c.durable.repeated == 0 and c.durable.ledger_duplicates == 0
    assert code == 0
    run_cli("stop", home=home)
