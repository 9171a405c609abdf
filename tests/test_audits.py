"""One Audit protocol for both workloads (core/audit.py): each workload audits its run from durable data
and says one verdict. Here the ledger alone (no Temporal: the client is None), for our loop and for a
user's workflow: a claim that was never stamped is lost once the workflow is over, and the sentence,
the lines and the JSON all say so; while the workflow runs there is no verdict yet."""

from __future__ import annotations

from checkpoint_tui.core.runs import record_run
from checkpoint_tui.ledger.effects import EffectSpec, claim_effect
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.settings import Settings
from checkpoint_tui.workloads import AgentLoopWorkload, UserWorkflow


def workload_of(kind: str):
    return AgentLoopWorkload(2, 0.0) if kind == "agent-loop" else UserWorkflow("SendLines")


async def test_an_unstamped_claim_is_lost_in_either_workloads_one_verdict(lab, tmp_path):
    settings = Settings(home=tmp_path / "h")
    settings.ensure_dirs()
    workload = workload_of(lab.kind)
    workflow_type = "SendLines" if lab.kind == "workflow" else None
    run_id = record_run(settings, 2, 0.0, kind=workload.kind, workflow_type=workflow_type)
    # claimed by an activity that died before its stamp (for a user's workflow, activity 1's)
    spec = EffectSpec(run_id, 1, "email", "hello", 1, 4242, run_id, key=None if lab.kind == "agent-loop" else "k-1")
    assert claim_effect(connect(settings.ledger), spec).outcome == "applied"

    running = await workload.audit(settings, None, run_id, "RUNNING")
    assert running.sentence() is None  # no verdict while the workflow runs

    audit = await workload.audit(settings, None, run_id, "COMPLETED")
    assert not audit.ok and audit.lost >= 1 and audit.duplicated == 0
    assert any(spec.id in d for d in audit.lost_detail), audit.lost_detail
    sentence = audit.sentence()
    assert sentence is not None and sentence.startswith("run completed") and "NOT exactly once" in sentence
    assert any(line.startswith("LOST ") for line in audit.lines())
    doc = audit.to_dict()
    assert doc["ok"] is False and doc["lost"] == audit.lost and doc["run_id"] == run_id
    assert f"lost={audit.lost}" in audit.summary()


async def test_a_run_that_ended_unfinished_is_lost_work_not_an_exactly_once_failure(lab, tmp_path):
    """A workflow that failed (a task that sat out its timeout, say) with nothing duplicated or at risk
    lost its work: the verdict says so, and does not blame exactly-once (it said "NOT exactly once")."""
    from checkpoint_tui.core.stuck import STUCK

    settings = Settings(home=tmp_path / "h")
    settings.ensure_dirs()
    workload = workload_of(lab.kind)
    workflow_type = "SendLines" if lab.kind == "workflow" else None
    run_id = record_run(settings, 2, 0.0, kind=workload.kind, workflow_type=workflow_type)
    failed = await workload.audit(settings, None, run_id, "FAILED")
    assert not failed.ok and failed.duplicated == 0
    sentence = failed.sentence() or ""
    assert sentence.startswith("run failed") and "work lost: the workflow FAILED (nothing duplicated)" in sentence
    assert "NOT exactly once" not in sentence, sentence
    stuck = (await workload.audit(settings, None, run_id, STUCK)).sentence() or ""
    assert "no progress: its workflow task keeps failing" in stuck and "NOT exactly once" not in stuck
