"""The checks of chaos on a user's workflow (proof/chaos/workflow_target.py): the audit's verdict as checks,
what resets re-ran, that an aim picked something, and that some fault reached an aimed activity."""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkpoint_tui.core.activity_audit import ActivityAudit
from checkpoint_tui.core.activity_history import ActivityExec
from checkpoint_tui.ops import codec_client
from checkpoint_tui.proof.chaos.targets import ChaosRun
from checkpoint_tui.proof.nemeses import resets
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_NEMESES
from checkpoint_tui.proof.nemeses.hop import AFTER, BEFORE
from checkpoint_tui.proof.nemeses.records import Fired
from checkpoint_tui.proof.report import EXERCISED, Check

IN_ACTIVITY = ("worker-in-activity", BEFORE, AFTER, *ACTIVITY_NEMESES)  # placed inside the aimed activity


def exercised_check(chaos: ChaosRun, acts: list[ActivityExec], aim: str, allowed: bool) -> Check:
    """Some fault reached an aimed activity: a kill inside one, an activity that ran again, a reset that re-ran
    something, an activity paused or reset (a schedule aimed at none of them: some event fired). Else the run
    proved nothing, and says so (NOT EXERCISED)."""
    inside = sum(k.landed == "inside" for k in chaos.kills)
    again = sum(a.re_executed for a in acts)
    reran = sum(bool(re_ran(r)) for r in chaos.resets)
    acted = sum(p.kind in ACTIVITY_NEMESES for p in chaos.pauses)
    seen = (
        f"kills inside an activity {inside} · activities run again {again} · resets that re-ran {reran} · "
        f"activity pauses and resets {acted}"
    )
    fired = len(chaos.kills) + len(chaos.pauses) + len(chaos.resets)
    aimed_in = any(ev.kind in (*IN_ACTIVITY, resets.RESET) for ev in chaos.schedule)
    # Events aimed into activities must reach one; others (a fleet's, the supervisor's, the dev server's) must fire.
    ok = bool(inside or again or reran or acted) if aimed_in else bool(fired or not chaos.schedule)
    if not ok:
        missed = [f"{n.nemesis}: {n.why}" for n in chaos.not_fired][:5]
        seen = (
            f"NOT EXERCISED: no fault reached an activity aimed at ({aim}) · {seen} · fired {len(chaos.kills)} "
            f"kill(s) and {len(chaos.pauses)} other(s)" + "".join(f"; not fired {m}" for m in missed)
        )
        seen += " · accepted by --allow-unexercised" if allowed else ""
    return Check(EXERCISED, ok or allowed, seen)


def aim_check(aim: str, acts: list) -> Check:
    """The run's activities, none of which `aim` picks: chaos aimed at nothing proved nothing."""
    seen = sorted({a.label for a in acts})
    return Check(
        "chaos: --aim picked an activity of the run",
        False,
        f"--aim {aim!r} matched none of the run's {len(acts)} activities: "
        f"{', '.join(seen[:12])[:400]}{' …' if len(seen) > 12 else ''}",
    )


def re_ran(reset: Fired) -> list[dict[str, Any]]:
    """What a fired reset ran again, each activity with its verdict (resets.activities_reran, in its detail)."""
    found = reset.detail.get("re_ran")
    return [e for e in found if isinstance(e, dict)] if isinstance(found, list) else []


def reset_check(fired: list[Fired], strict_models: bool) -> Check:
    """Every reset re-ran something, and nothing it re-ran was at risk (nor a model request, if strict)."""
    reran = [e for r in fired for e in re_ran(r)]
    n = Counter(e["verdict"] for e in reran)
    idle = [r.step for r in fired if not re_ran(r)]
    risky = "".join(f"; #{e['activity_id']} {e['label']}: {e['why']}" for e in reran if e["verdict"] == "at risk")
    ok = not n["at risk"] and not idle and not (strict_models and n["model"])
    return Check(
        "chaos: a reset re-ran no tool call or activity at risk",
        ok,
        f"{len(fired)} reset(s) · re-ran {len(reran)} (guarded {n['guarded']}, AT RISK {n['at risk']}, model "
        f"{n['model']}) · resets that re-ran nothing {idle}{risky[:1500]}",
    )


def activity_checks(a: ActivityAudit) -> list[Check]:
    """The verdict as checks: it passes exactly when all of them do (ActivityAudit.ok)."""
    risky = "; ".join(f"#{r['seq']} {r.get('label') or r['type']} attempt {r['attempt']}" for r in a.at_risk[:10])
    models = f"model requests re-run {len(a.model_reruns)}, tokens paid twice {a.tokens_paid_again}"
    return [
        Check(
            "chaos: workflow COMPLETED",
            a.workflow_status == "COMPLETED",
            f"workflow {a.workflow_status} · activities {a.completed}/{a.activities}",
        ),
        Check("chaos: no lost effect", a.lost == 0, f"lost {a.lost}" + "".join(f"; {d}" for d in a.lost_detail[:10])),
        Check(
            "chaos: no duplicated effect",
            a.duplicated == 0,
            f"duplicated {a.duplicated}" + "".join(f"; {d}" for d in a.duplicated_detail[:10]),
        ),
        Check(
            "chaos: no re-executed tool call or activity at risk",
            not a.at_risk,
            f"re-executed {len(a.re_executed)} · guarded {len(a.guarded_re_executed)} · at risk {len(a.at_risk)}"
            + (f": {risky}" if risky else ""),
        ),
        Check(
            "chaos: every activity's arguments decoded",
            not a.never_ran,
            f"never ran (decode error) {len(a.never_ran)}"
            + "".join(f"; #{r['seq']} {r['type']}" for r in a.never_ran[:5]),
        ),
        Check(
            "chaos: model requests re-run" + (" (--strict-models)" if a.strict_models else " (reported apart)"),
            not (a.strict_models and a.model_reruns),
            models,
        ),
        Check(
            "chaos: no lost work (a task that sat out its timeout, a failed workflow, a workflow task failing)",
            not a.lost_work_count,
            f"lost {a.lost_work_count}" + "".join(f"; {u}" for u in (a.lost_work or {}).get("units", [])[:10]),
        ),
    ]


def converter_check(client: object) -> list[Check]:
    """With --data-converter or a codec server: every payload of the histories read was read through it.
    One it could not read (another key, another converter) leaves the audit blind to what it holds: a
    failure, named."""
    converter, unread, first = codec_client.said(client)
    if converter is None:
        return []
    said = f"{unread} payload(s) it could not read, first: {first}" if unread else f"every payload read by {converter}"
    return [Check("chaos: every payload read through the team's converter", not unread, said, {"undecodable": unread})]
