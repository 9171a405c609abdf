"""How a chaos report reads on the terminal: what fired where and what it cost, the workload's audit
(its target's lines), the game day's fleet figures, then the one verdict with the checks that failed."""

from __future__ import annotations

from checkpoint_tui.core.windows import counts
from checkpoint_tui.proof.chaos.schedule import FORGE
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.nemeses import activity_faults as activity_nemeses
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_NEMESES
from checkpoint_tui.proof.nemeses.model_faults import FAULTS as MODEL_FAULTS
from checkpoint_tui.proof.report import EXERCISED
from checkpoint_tui.proof.report.chaos import ChaosReport, Fired, Totals, TouchedFigures


def print_report(report: ChaosReport, target: ChaosTarget) -> None:
    """What fired where and what it cost, then the workload's audit, then the one verdict."""
    for line in fired_lines(report, target):
        print(line)
    for line in window_lines(report):
        print(line)
    for line in [*fleet_lines(report), *target.lines(report)]:
        print(line)
    if report.touched is not None:
        print(touched_line(report.touched))
    if report.totals is not None:
        print(totals_line(report.totals))
    failed = [c for c in report.checks if not c.ok]
    for c in failed:  # the verdict's reasons, each the check that failed and what it saw
        print(f"FAIL  {c.name}: {c.observed[:600]}")
    idle = bool(failed) and all(c.name == EXERCISED for c in failed)  # nothing else failed: nothing was tried
    if (cluster := report.temporal) is not None:
        whose = "this home's dev server" if cluster.started_by_lab else "a server the lab did not start"
        converter = f" · payloads through {cluster.data_converter}" if cluster.data_converter else ""
        print(f"temporal {cluster.address} (namespace {cluster.namespace}, {whose}){converter}")
    print(f"wall {report.wall_s:.1f} s · verdict: {'PASS' if not failed else 'NOT EXERCISED' if idle else 'FAIL'}")


def place_word(unit: str) -> str:
    """What a schedule's place counts: a user's workflow's events are placed at the run's aimed activity
    starts (--aim), which the activity ids the kill lines name need not match; our loop's at its steps."""
    return "aimed start" if unit == "activity" else unit


def touched_line(t: TouchedFigures) -> str:
    """How soon the runs the worker deaths touched went on: the interrupted attempt's next, the run's next event."""
    na, res = t.next_attempt, t.resumed
    line = (
        f"touched: {t.runs} run(s) by the worker deaths · next attempt p50 {na['p50_s']:.2f} s, "
        f"p99 {na['p99_s']:.2f} s, max {na['max_s']:.2f} s"
    )
    line += f" · run resumed p50 {res['p50_s']:.2f} s, p99 {res['p99_s']:.2f} s" if res else ""
    n = t.through_server_kill
    return line + (f" · {n} of the {t.touches} waited out a dev-server kill as well" if n else "")


def totals_line(t: Totals) -> str:
    """The runs' counts summed, each a verdict can fail on (lost work too: a run failed on it must not
    read LOST 0 above the FAIL)."""
    risk = f" · AT RISK {t.at_risk}" if t.at_risk is not None else ""
    risk += f" · LOST WORK {t.lost_work}" if t.lost_work is not None else ""
    return (
        f"{t.runs_completed}/{t.runs} runs COMPLETED · over all runs: LOST {t.lost} · DUPLICATED {t.duplicated}{risk}"
    )


def fired_lines(report: ChaosReport, target: ChaosTarget) -> list[str]:
    """Each kill, pause and reset with where it landed and what it cost; each event that did not fire;
    each run but the lead's verdict."""
    unit, lines = report.unit, []
    for k in report.kills:
        r = "none" if k.restart_s is None else f"{k.restart_s:.2f} s"
        r += f", its next attempt after {k.retry_s:.2f} s" if k.retry_s is not None else ""
        where = f"{_where(k, unit)} pid {k.pid or '-':>7}{_landed(k)}"
        lines.append(f"  kill {k.kind:<26} {where} -> run resumed after {r}")
    for p in report.pauses:
        r = "none" if p.stalled_s is None else f"{p.stalled_s:.2f} s"
        if p.recovery_s is not None and p.kind != FORGE:
            r += f" (next activity {p.recovery_s:.2f} s after it ended)"
        how = f"for {p.duration_s:.2f} s" if p.duration_s is not None else (p.watchdog or "")
        how += f" · {activity_nemeses.describe(p.detail)}" if p.kind in ACTIVITY_NEMESES else ""
        if p.kind in MODEL_FAULTS:  # in force for its requests (or its time): what it met says more
            how = f"on {p.detail.get('endpoint')}: met {p.detail.get('met')} request(s)"
        lines.append(f"  {p.kind:<31} {_where(p, unit)} pid {p.pid or '-':>7} {how} -> run stalled {r}")
    for reset in report.resets:
        back = f"back to {unit} {reset.detail.get('from_step')} (event {reset.detail.get('reset_to_event')})"
        lines.append(f"  reset {'':<26} {_where(reset, unit)} {back}: {target.reset_summary(reset)}")
    for ev in report.not_fired:
        where = f"{place_word(unit)} {ev.at_step}" if ev.at_step is not None else f"{ev.at_s or 0.0:.2f} s"
        lines.append(f"  not fired: {ev.nemesis} at {where} ({ev.why})")
    for run in (report.runs or [])[1:]:  # the lead's audit is the report's own, printed below
        bad = [c.name for c in run.checks if not c.ok]
        lines.append(f"  run {run.run_id}: {'PASS' if not bad else 'FAIL ' + '; '.join(bad)}")
    return lines


def window_lines(report: ChaosReport) -> list[str]:
    """Where the worker deaths landed, counted by window (with several runs, each run's too)."""
    placed = report.kill_windows
    if not placed:
        return []
    found = " · ".join(f"{w} {n}" for w, n in report.windows.items())
    deaths, runs = {(k.pid, k.at) for k in placed}, {k.run_id for k in placed}
    each = f", each placed in {len(runs)} runs" if len(deaths) < len(placed) else ""
    lines = [f"  windows ({len(deaths)} worker deaths{each}): {found}"]
    for run in (report.runs or []) if each else []:  # each run's own history says where
        mine = counts([k.window for k in placed if k.run_id == run.run_id])
        lines.append(f"    {run.run_id}: {' · '.join(f'{w} {n}' for w, n in mine.items()) or 'none'}")
    return lines


def _where(fired: Fired, unit: str = "step") -> str:
    """Where a fired nemesis landed: its unit (and what it was), and its time if placed by time."""
    at = f" (at {fired.fired_s:.2f} s)" if fired.fired_s is not None else ""
    what = f" {fired.label}" if fired.label else ""
    aimed = fired.detail.get("aimed")
    if isinstance(aimed, int) and not isinstance(aimed, bool) and aimed != fired.step:  # the schedule's number
        what += f" ({place_word(unit)} {aimed})" if unit == "activity" else f" (scheduled at {unit} {aimed})"
    if isinstance(run := fired.detail.get("run"), str):  # the lead's aimed activity had closed: this run's
        what += f" in {run[:80]} (the lead's had closed)"
    return f"{unit} {fired.step:>4}{what}{at}"


def _landed(fired: Fired) -> str:
    """How far into its activity an in-activity kill landed, against the type's usual duration (a crash point
    of the hop: the window it was held in)."""
    landed = fired.landed
    if fired.window:  # a crash point's window; where the kill found the activity, when that says more
        return f" ({fired.window}; {landed})" if landed and landed != "inside" else f" ({fired.window})"
    if fired.into_s is None:  # no measure of how far in: still where it landed ("after it closed")
        return f" ({landed})" if landed else ""
    usual = f" of ~{fired.usual_s:.2f} s" if fired.usual_s else ""
    return f" {fired.into_s:.2f} s in{usual}" + (f" ({landed})" if landed else "")


def fleet_lines(report: ChaosReport) -> list[str]:
    """A game day's figures (proof/chaos/fleet_lab.py): each worker command's events, the backlog's peak
    and each fleet event's drain, the dependencies' traffic."""
    fleet = report.fleet
    if fleet is None:
        return []
    lines = []
    for c in fleet.commands:
        events = " · ".join(f"{k} {v}" for k, v in c.events.items()) or "no worker events"
        lines.append(f"  fleet {c.queue}" + (f" version {c.version}" if c.version else "") + f": {events}")
    backlog = fleet.backlog
    if backlog is not None and backlog.samples:
        drains = [
            f"after {e.name} peak {e.peak}, "
            + ("never drained" if e.drain_s is None else f"drained in {e.drain_s:.1f} s")
            for e in backlog.events
        ]
        lines.append(
            f"  backlog: peak {backlog.peak} tasks ({backlog.samples} samples)" + "".join(f" · {d}" for d in drains)
        )
    for name, stats in (fleet.dependencies or {}).items():
        nums = " · ".join(f"{k} {v}" for k, v in stats.items() if type(v) in (int, float))
        lines.append(f"  dependency {name}: {nums}")
    for name, stats in (fleet.models or {}).items():
        lines.append(f"  model endpoint {name}: {stats.get('requests')} request(s)")
        spells = stats.get("spells")
        lines += [f"    {spell_line(s)}" for s in spells if isinstance(s, dict)] if isinstance(spells, list) else []
    return lines


def spell_line(s: dict) -> str:
    """One model fault's cost (proof/chaos/model_lab.py)."""
    statuses = s.get("statuses")
    statuses = statuses if isinstance(statuses, dict) else {}
    seen = ", ".join(f"{'no answer' if k == 'None' else k} x{v}" for k, v in statuses.items()) or "none"
    seen += f", {s.get('broken')} broken off" if s.get("broken") else ""
    back = s.get("recovered_s")
    after = "no usable answer after it"
    if isinstance(back, int | float):
        after = f"a usable answer {back:.2f} s after it began"
    return (
        f"{s.get('fault')}: met {s.get('met')} request(s) ({seen}) · {s.get('tokens_billed')} tokens billed for them"
        f" · asked {s.get('asked_after')} more time(s) · {after}"
        + (f" · {s['answered_by']}" if s.get("answered_by") else "")
    )
