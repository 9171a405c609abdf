"""How a chaos report reads on the terminal: what fired where and what it cost, the workload's audit
(its target's lines), the game day's fleet figures, then the one verdict with the checks that failed."""

from __future__ import annotations

from checkpoint_tui.core.windows import counts
from checkpoint_tui.proof.chaos.schedule import FORGE
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.nemeses import activities as activity_nemeses
from checkpoint_tui.proof.nemeses.activities import ACTIVITY_NEMESES
from checkpoint_tui.proof.report import EXERCISED


def print_report(report: dict, target: ChaosTarget) -> None:
    """What fired where and what it cost, then the workload's audit, then the one verdict."""
    unit = report.get("unit", "step")
    for k in report["kills"]:
        r = "none" if k.get("restart_s") is None else f"{k['restart_s']:.2f} s"
        r += f", its next attempt after {k['retry_s']:.2f} s" if k.get("retry_s") is not None else ""
        print(f"  kill {k['kind']:<26} {_where(k, unit)} pid {k['pid'] or '-':>7}{_landed(k)} -> run resumed after {r}")
    for p in report["pauses"]:
        r = "none" if p.get("stalled_s") is None else f"{p['stalled_s']:.2f} s"
        if p.get("recovery_s") is not None and p["kind"] != FORGE:
            r += f" (next activity {p['recovery_s']:.2f} s after it ended)"
        how = f"for {p['duration_s']:.2f} s" if "duration_s" in p else (p.get("watchdog") or "")
        how += f" · {activity_nemeses.describe(p)}" if p["kind"] in ACTIVITY_NEMESES else ""
        print(f"  {p['kind']:<31} {_where(p, unit)} pid {p['pid'] or '-':>7} {how} -> run stalled {r}")
    for r in report.get("resets", []):
        print(
            f"  reset {'':<26} {_where(r, unit)} back to {unit} {r['from_step']} (event {r['reset_to_event']}): "
            f"{target.reset_summary(r)}"
        )
    for ev in report.get("not_fired", []):
        where = f"{unit} {ev['at_step']}" if "at_step" in ev else f"{ev['at_s']:.2f} s"
        print(f"  not fired: {ev['nemesis']} at {where} ({ev['why']})")
    for run in report.get("runs", [])[1:]:  # the lead's audit is the report's own, printed below
        bad = [c["name"] for c in run["checks"] if not c["ok"]]
        print(f"  run {run['run_id']}: {'PASS' if not bad else 'FAIL ' + '; '.join(bad)}")
    if report.get("kill_windows"):
        found = " · ".join(f"{w} {n}" for w, n in report["windows"].items())
        deaths, runs = (
            {(k["pid"], k["at"]) for k in report["kill_windows"]},
            {k["run_id"] for k in report["kill_windows"]},
        )
        placed = f", each placed in {len(runs)} runs" if len(deaths) < len(report["kill_windows"]) else ""
        print(f"  windows ({len(deaths)} worker deaths{placed}): {found}")
        for run in report.get("runs", []) if placed else []:  # each run's own history says where
            mine = counts([k["window"] for k in report["kill_windows"] if k["run_id"] == run["run_id"]])
            print(f"    {run['run_id']}: {' · '.join(f'{w} {n}' for w, n in mine.items()) or 'none'}")
    for line in fleet_lines(report):
        print(line)
    for line in target.lines(report):
        print(line)
    if "totals" in report:
        t = report["totals"]
        risk = f" · AT RISK {t['at_risk']}" if "at_risk" in t else ""
        print(
            f"{t['runs_completed']}/{t['runs']} runs COMPLETED · over all runs: LOST {t.get('lost', 0)} · "
            f"DUPLICATED {t.get('duplicated', 0)}{risk}"
        )
    failed = [c for c in report["checks"] if not c["ok"]]
    for c in failed:  # the verdict's reasons, each the check that failed and what it saw
        print(f"FAIL  {c['name']}: {c['observed'][:600]}")
    idle = bool(failed) and all(c["name"] == EXERCISED for c in failed)  # nothing else failed: nothing was tried
    print(f"wall {report['wall_s']:.1f} s · verdict: {'PASS' if not failed else 'NOT EXERCISED' if idle else 'FAIL'}")


def _where(fired: dict, unit: str = "step") -> str:
    """Where a fired nemesis landed: its unit (and what it was), and its time if placed by time."""
    at = f" (at {fired['fired_s']:.2f} s)" if "fired_s" in fired else ""
    what = f" {fired['label']}" if fired.get("label") else ""
    return f"{unit} {fired['step']:>4}{what}{at}"


def _landed(fired: dict) -> str:
    """How far into its activity an in-activity kill landed, against the type's usual duration (a crash point
    of the hop: the window it was held in)."""
    if fired.get("window"):
        return f" ({fired['window']})"
    if fired.get("into_s") is None:
        return ""
    usual = f" of ~{fired['usual_s']:.2f} s" if fired.get("usual_s") else ""
    landed = f" ({fired['landed']})" if fired.get("landed") else ""
    return f" {fired['into_s']:.2f} s in{usual}{landed}"


def fleet_lines(report: dict) -> list[str]:
    """A game day's figures (proof/chaos/fleet_lab.py): each worker command's events, the backlog's peak
    and each fleet event's drain, the dependencies' traffic."""
    fleet = report.get("fleet") or {}
    lines = []
    for c in fleet.get("commands", []):
        counts = " · ".join(f"{k} {v}" for k, v in c.items() if k not in ("queue", "command")) or "no worker events"
        lines.append(f"  fleet {c['queue']}: {counts}")
    backlog = fleet.get("backlog") or {}
    if backlog.get("samples"):
        drains = [
            f"after {e['name']} peak {e.get('peak')}, "
            + ("never drained" if e.get("drain_s") is None else f"drained in {e['drain_s']:.1f} s")
            for e in backlog.get("events", [])
        ]
        lines.append(
            f"  backlog: peak {backlog.get('peak')} tasks ({backlog['samples']} samples)"
            + "".join(f" · {d}" for d in drains)
        )
    for name, stats in (fleet.get("dependencies") or {}).items():
        nums = " · ".join(f"{k} {v}" for k, v in stats.items() if type(v) in (int, float))
        lines.append(f"  dependency {name}: {nums}")
    return lines
