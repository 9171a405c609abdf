"""Where each kill and pause landed in a user's workflow, as its history tells once the run is over:
inside an activity, as it completed, after it closed, or in another workflow; the crash points of the
hop named as history classifies their activity; each kill's retry and restart times."""

from __future__ import annotations

from checkpoint_tui.core.activity_history import ActivityExec, first_event_after
from checkpoint_tui.core.chain import Chain
from checkpoint_tui.proof.chaos.targets import ChaosRun
from checkpoint_tui.proof.nemeses import activity_faults as activity_nemeses
from checkpoint_tui.proof.nemeses import processes as nemeses
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_NEMESES
from checkpoint_tui.proof.nemeses.aim import Progress
from checkpoint_tui.proof.nemeses.hop import HOP_KINDS, RECORDED
from checkpoint_tui.proof.nemeses.records import Fired


def _landed(act: ActivityExec, fired: Fired) -> str:
    """`inside` (the attempt died with the worker), `as it completed` (its body had returned and the
    completion reached Temporal from the killed worker: nothing re-ran), or `after it closed` (the
    kill hit whatever came next)."""
    if act.closed_at is not None and fired.at >= act.closed_at:
        return "after it closed"
    if act.attempt == 1 and act.identity is not None and act.identity == fired.identity:
        return "as it completed"
    return "inside"


def _workflow_ids(chain: Chain) -> set[str]:
    return {chain.workflow_id, *(w for child in chain.children for w in _workflow_ids(child))}


def _named_from_history(fired: Fired, by_id: dict, lead: str | None) -> None:
    """A crash point's activity as history classifies it (its place in the run, a tool call's name and call id:
    the hop saw one task alone)."""
    d = fired.detail
    act = by_id.get((d.get("execution"), d.get("activity_id"))) if d.get("workflow_id") == lead else None
    if act is not None:
        fired.step = act.seq
        d["label"], d["class"] = act.label, act.cls


def place(
    chaos: ChaosRun,
    progress: Progress | None,
    run_id: str,
    chains: list[Chain],
    runs: dict[str, Progress] | None = None,
) -> None:
    """Set each fired kill's and pause's `landed`, `retry_s`, `stalled_s` and `restart_s` (`chains`: every
    run's, whose workflows and children are the run's own; `runs`: every run's progress, for a kill
    aimed in another run than the lead, its `run`)."""
    chain = progress.chain if progress is not None else Chain(run_id)
    acts = {a.seq: a for a in progress.acts} if progress is not None else {}
    last_inside: dict[tuple[str | None, int], tuple[Fired, ActivityExec]] = {}
    by_id = {(a.execution, a.activity_id): a for a in acts.values()}
    lead = progress.run_id if progress is not None else None
    ours = {w for c in chains for w in _workflow_ids(c)}  # the runs' and their children's
    for fired in chaos.kills:  # where an in-activity kill landed, as history tells afterwards
        if fired.kind in HOP_KINDS:  # a crash point of the hop landed where it was held, by construction
            fired.landed = (
                "in another workflow"
                if fired.detail.get("workflow_id") not in ours
                else "after it closed"
                if fired.kind == RECORDED
                else "inside"
            )
            _named_from_history(fired, by_id, lead)
        elsewhere = (runs or {}).get(str(fired.detail.get("run")))  # aimed in another run: its activities
        mine = {a.seq: a for a in elsewhere.acts} if elsewhere is not None else acts
        act = mine.get(fired.step or 0) if fired.kind in ("worker-in-activity", *HOP_KINDS) else None
        if fired.detail.get("workflow_id", progress and progress.run_id) != (
            progress and progress.run_id
        ):  # a child workflow's activity: not the parent's seq
            act = None
        if act is not None:
            fired.landed = fired.landed or _landed(act, fired)
            if fired.landed == "inside":
                last_inside[(fired.detail.get("run"), act.seq)] = (fired, act)
    for fired, act in last_inside.values():  # history keeps the start of an activity's last attempt only
        if act.attempt > 1 and act.started_at is not None and act.started_at > fired.at:
            fired.retry_s = act.started_at - fired.at
    for f in [p for p in chaos.pauses if p.kind in ACTIVITY_NEMESES]:  # the closing attempt, from history
        same = [a for a in acts.values() if a.activity_id == f.detail["activity_id"]]
        act = next((a for a in same if a.execution == f.detail["execution"]), same[-1] if same else None)
        activity_nemeses.settle(f, act.attempt if act is not None else None)
    for fired in [*chaos.kills, *chaos.pauses]:
        nxt = first_event_after(chain, nemeses.ended_at(fired.at, fired.detail), fired.identity)
        fired.stalled_s = fired.restart_s = None if nxt is None else nxt - fired.at
