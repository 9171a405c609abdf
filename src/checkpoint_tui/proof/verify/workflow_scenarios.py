"""The --verify scenarios of a user's workflow (`checkpoint-tui --worker-cmd CMD --verify --workflow TYPE
--input JSON`), run on their own worker in a home of its own (run/verify):

1. kill mid-run: three SIGKILLs of the worker while one of the workflow's activities is in flight
   on it (a cold spawn replaces it; assisted failover fails the dead worker's attempts by identity);
2. supervisor killed: a separate `start --wait` process is SIGKILLed; the worker survives and a new
   supervisor adopts the same pid;
3. unassisted kill: only the killed activity's own timeout brings the attempt back (its heartbeat
   timeout, or its start-to-close timeout when it has none: then the bound says so);
4. replay: every execution of every run's recorded history is replayed by a freshly started worker
   of the user's command (a query on a closed workflow replays its whole history on the current
   workflow code: a non-determinism error fails it), and no workflow task failed during the runs.

Each run is audited (core/activity_audit.py): completed, nothing lost or duplicated, no re-executed
tool call or activity at risk (model requests re-run are reported apart). Everything is read back
from Temporal and the ledger.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict

from checkpoint_tui.core.activity_history import (
    Chain,
    first_event_after,
    read_activities,
    read_chain,
    workflow_task_failures,
)
from checkpoint_tui.core.destination_audit import assign, read_after, save
from checkpoint_tui.ledger.destination import read_ids
from checkpoint_tui.proof.nemeses.aim import Progress, until_activity
from checkpoint_tui.proof.verify import plan
from checkpoint_tui.proof.verify.plan import Scenario, VerifyContext

RUN_TIMEOUT_S = 120.0
# kill -> the next worker at work, assisted: a cold spawn of the user's command (measured: how long
# the first one took to poll) + Temporal's first retry interval (1 s by default) + this slack
RESUME_SLACK_S = 2.0
FIRST_RETRY_S = 1.0
UNASSISTED_SLACK_S = 5.0  # beyond the activity's own heartbeat timeout: retry interval + a cold spawn
KILL_AT = (2, 3, 4)  # the activities (in scheduling order) a kill lands in


async def _finish(ctx: VerifyContext, run_id: str) -> tuple[str | None, Chain]:
    status = await ctx.finish(run_id, RUN_TIMEOUT_S)
    return status, await read_chain(ctx.client, run_id)


async def _audit(ctx: VerifyContext, tag: str, run_id: str, status: str | None) -> None:
    if dests := getattr(ctx.workload, "destinations", ()):  # what the run added where its effects land
        run_dir = ctx.settings.run_dir
        diffs = [await asyncio.to_thread(read_after, d, b, run_dir) for d, b in zip(dests, ctx.readings, strict=True)]
        acts = await read_activities(ctx.client, run_id, None, ctx.framework)
        save(ctx.settings.run_dir, run_id, diffs, assign(diffs, {run_id: acts}, run_id)[run_id])
        ctx.readings = [await asyncio.to_thread(read_ids, d, run_dir) for d in dests]  # the next run's baseline
    a = await ctx.workload.audit(ctx.settings, ctx.client, run_id, status)
    ctx.report.check(
        f"{tag} COMPLETED, nothing lost, duplicated or at risk",
        a.ok,
        f"status={status} {a.summary()}" + "".join(f"; {d}" for d in (a.lost_detail + a.duplicated_detail)[:5]),
    )


async def _kill_in_activity(ctx: VerifyContext, run_id: str, k: int, reason: str) -> dict | None:
    """SIGKILL the live worker while the k-th activity is in flight on it; None if the run ended first."""
    sup = ctx.sup
    assert sup is not None
    live = lambda: sup.primary.name if sup.primary is not None else None  # noqa: E731
    progress = Progress(ctx.client, run_id, ctx.framework)
    act = await until_activity(progress, lambda: progress.activity(k), live, RUN_TIMEOUT_S)
    if act is None:
        return None
    worker = sup.primary
    if worker is None:
        return None
    report = await sup.kill(reason, worker, {"activity_id": act.activity_id, "aimed_workflow": run_id})
    bound = act.unassisted_bound_s
    name = act.info.name if act.info is not None and act.cls in ("tool", "mcp") and act.info.name else None
    return {
        **asdict(report),
        "identity": worker.name,
        "activity": k,
        "label": act.label,
        "bound_s": bound,
        "kind": f"the {name} tool's activity" if name else act.activity_type,
        "bound_from": "heartbeat timeout" if act.heartbeat_timeout_s else "start-to-close timeout",
    }


def _resume_s(chain: Chain, kill: dict) -> float | None:
    nxt = first_event_after(chain, kill["at"], kill["identity"])
    return None if nxt is None else nxt - kill["at"]


async def kill_mid_run(ctx: VerifyContext) -> None:
    await ctx.supervise()
    run_id = await ctx.start()
    kills = [k for k in [await _kill_in_activity(ctx, run_id, k, "verify: kill mid-run") for k in KILL_AT] if k]
    status, chain = await _finish(ctx, run_id)
    r = ctx.report
    r.check(
        "1. worker really dies: SIGKILL, no exit code, confirmed",
        bool(kills)
        and all(
            k["signal"] == "SIGKILL" and k["observed"] and k["exit_code"] is None and k["confirmed"] for k in kills
        ),
        "; ".join(
            f"pid={k['pid']} activity={k['activity']} signal={k['signal']} exit_code={k['exit_code'] or 'none'}"
            f" confirmed={k['confirmed']}"
            for k in kills
        )
        or "no kill landed (the workflow ended first)",
    )
    names = {k["identity"] for k in kills}
    acts = [ev for ev in chain.events if ev.HasField("activity_task_started_event_attributes")]
    last = acts[-1].activity_task_started_event_attributes.identity if acts else None
    r.check(
        "1b. another worker finished the run",
        last is not None and last not in names,
        f"last activity by {last}; killed {', '.join(sorted(names)) or 'none'}",
    )
    spawn = ctx.ready_s or 0.0
    target = spawn + FIRST_RETRY_S + RESUME_SLACK_S
    for i, k in enumerate(kills, 1):
        resumed = _resume_s(chain, k)
        judge = r.check if resumed is None else r.latency_check  # None: it never resumed, a failure
        judge(
            f"1c. kill #{i} (activity {k['activity']}): the run resumed in time",
            resumed is not None and resumed <= target,
            f"resumed after {_s(resumed)} (≤{target:.1f}s: a cold spawn of the worker command {spawn:.2f} s, "
            f"the first retry {FIRST_RETRY_S:g} s, {RESUME_SLACK_S:g} s slack)",
            resume_s=resumed,
        )
    await _audit(ctx, "1d.", run_id, status)


async def supervisor_killed(ctx: VerifyContext) -> None:
    async def progressed(run_id: str) -> None:
        progress = Progress(ctx.client, run_id, ctx.framework)
        await until_activity(progress, lambda: progress.activity(2), None, RUN_TIMEOUT_S)

    async def judge(run_id: str, status: str | None) -> None:
        await _audit(ctx, "2c.", run_id, status)

    await plan.supervisor_killed(ctx, 2, ctx.workload, progressed, judge, RUN_TIMEOUT_S)


async def unassisted(ctx: VerifyContext) -> None:
    await ctx.supervise(assist=False)
    run_id = await ctx.start()
    kill = await _kill_in_activity(ctx, run_id, KILL_AT[0], "verify: unassisted kill")
    status, chain = await _finish(ctx, run_id)
    resumed = _resume_s(chain, kill) if kill else None
    own = (kill or {}).get("bound_s") or 0.0
    budget = own + UNASSISTED_SLACK_S
    source = (kill or {}).get("bound_from", "timeout")
    slow = (
        f"; a kill there costs a minute or more: give {(kill or {}).get('kind')} a heartbeat timeout"
        if own >= 60
        else ""
    )
    judge = ctx.report.check if kill is None or resumed is None else ctx.report.latency_check
    judge(
        f"3. unassisted kill: the activity's own {source} brings it back",
        kill is not None and resumed is not None and resumed <= budget,
        f"resumed after {_s(resumed)} (≤ {source} {own:g} s of {(kill or {}).get('label')} + "
        f"{UNASSISTED_SLACK_S:g} s = {budget:.1f} s){slow}",
        unassisted_resume_s=resumed,
    )
    await _audit(ctx, "3b.", run_id, status)


async def replay(ctx: VerifyContext) -> None:
    """A fresh worker replays every recorded execution (a query on a closed workflow replays it whole)."""
    await ctx.unsupervise(stop_workers=True)
    await ctx.supervise()
    replayed, failed, task_failures = 0, [], []
    for run_id in ctx.runs:
        chain = await read_chain(ctx.client, run_id)
        task_failures += [f"{run_id}: {f}" for f in workflow_task_failures(chain)]
        for execution, _ in chain.executions:
            try:
                await ctx.client.get_workflow_handle(run_id, run_id=execution).query("__stack_trace")
                replayed += 1
            except Exception as err:  # WorkflowQueryFailedError / RPCError: the replay's error
                failed.append(f"{run_id}/{execution[:8]}: {str(err).splitlines()[0][:200] if str(err) else err!r}")
    ctx.report.check(
        "4. every recorded history replays on the worker's current code",
        replayed > 0 and not failed,
        f"replayed {replayed} execution(s) on a fresh worker" + "".join(f"; {f}" for f in failed[:5]),
    )
    ctx.report.check(
        "4b. no workflow task failed during the runs", not task_failures, "; ".join(task_failures[:5]) or "none"
    )


def _s(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}s"


SCENARIOS: list[Scenario] = [kill_mid_run, supervisor_killed, unassisted, replay]
