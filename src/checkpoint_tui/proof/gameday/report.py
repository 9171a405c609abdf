"""The game day's after-action report, in the terms of Temporal's pre-production testing guide and its
recovery checklist: per experiment what broke, what held, what was lost (each unit named), what drained
how fast; then what to change. Markdown for people, JSON for tools (`gameday.json`), and the checks as
JUnit. Every figure comes from the experiment's chaos report (the ledger, history, run/ samples)."""

from __future__ import annotations

from dataclasses import dataclass, field

from checkpoint_tui.proof.chaos.printing import spell_line
from checkpoint_tui.proof.gameday.scenarios import Scenario
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.audit import ActivityAuditRecord
from checkpoint_tui.proof.report.chaos import ChaosReport
from checkpoint_tui.proof.report.codec import JsonObject, decode, encode
from checkpoint_tui.proof.report.gameday import ExperimentRecord, GamedayReport
from checkpoint_tui.settings import Settings

CHECKLIST = (
    ("Workflows resume without manual intervention", "every run COMPLETED"),
    ("No permanent Workflow Task failures", "no workflow task still failing at the end"),
    ("Activity retries behave as expected", "no task lost to a graceful stop, no duplicate, nothing at risk"),
    ("Backlogs drain in predictable time", "each fleet event's backlog drained within --max-drain-s"),
)


@dataclass
class Experiment:
    """One scenario of the game day as it ran: when, its chaos report (the schema's, or its JSON, read
    through it) and its checks."""

    scenario: Scenario
    started_at: float = 0.0
    ended_at: float = 0.0
    report: ChaosReport = field(default_factory=ChaosReport)
    checks: list[Check] = field(default_factory=list)

    def __post_init__(self) -> None:
        if isinstance(self.report, dict):
            self.report = decode(ChaosReport, self.report)

    @property
    def held(self) -> bool:
        return self.scenario.skipped is not None or all(c.ok for c in self.checks)

    def record(self) -> ExperimentRecord:
        s = self.scenario
        return ExperimentRecord(
            scenario=s.name,
            guide=s.guide,
            watch=s.watch,
            skipped=s.skipped,
            started_at=self.started_at,
            ended_at=self.ended_at,
            held=self.held,
            schedule=[e.to_json() for e in s.events],
            checks=self.checks,
            report=self.report if s.skipped is None else None,
        )


def scenario_checks(report: ChaosReport | JsonObject, max_drain_s: float) -> list[Check]:
    """The experiment's checks: its chaos checks (every run's audit: lost work, duplicates, at risk),
    then one drain check per fleet event whose backlog the sampler saw. `report`: the experiment's
    chaos report, or its JSON."""
    doc = decode(ChaosReport, report) if isinstance(report, dict) else report
    checks = list(doc.checks)
    backlog = doc.fleet.backlog if doc.fleet is not None else None
    for ev in backlog.events if backlog is not None else []:
        drain, peak = ev.drain_s, ev.peak or 0
        ok = peak == 0 or (drain is not None and drain <= max_drain_s)  # no backlog: nothing to drain
        seen = "never drained" if drain is None else f"drained {drain:.1f} s after it ended"
        seen = "no backlog" if peak == 0 else seen
        checks.append(
            Check(
                f"gameday: backlog drains after {ev.name} (≤ {max_drain_s:g} s)",
                ok,
                f"peak {ev.peak} tasks · {seen}",
                {"drain_s": drain, "peak": ev.peak},
            )
        )
    return checks


def _lost(report: ChaosReport) -> list[str]:
    """Every unit of lost work the runs' audits named, one line each."""
    return [f"{a.run_id}: {line}" for a in _runs(report) if a.lost_work is not None for line in a.lost_work.units]


def _runs(report: ChaosReport) -> list[ActivityAuditRecord]:
    """Every run's audit (a game day's workload is a user's workflow: an activity audit each)."""
    audits = [r.audit for r in report.runs or []] or [report.audit]
    return [a for a in audits if isinstance(a, ActivityAuditRecord)]


def _recovered(report: ChaosReport) -> list[str]:
    """What the runs' histories show went wrong and recovered: timeouts waited out after the lab's
    kills, workflow task failures that ended (how long the run was stuck), each run's schedule-to-start."""
    out, latencies = [], []
    for audit in _runs(report):
        lost = audit.lost_work
        if lost is None:
            continue
        out += [f"{audit.run_id}: {u.line}" for u in (*lost.timeouts, *lost.task_failures) if not u.lost]
        latency = lost.schedule_to_start.get("activity")
        if latency is not None and latency.p99_s is not None:
            latencies.append(latency.p99_s)
    if latencies:
        out.append(f"activity schedule-to-start p99 per run: worst {max(latencies):.3f} s")
    return out


def _figures(report: ChaosReport) -> list[str]:
    fleet, lines = report.fleet, []
    for c in fleet.commands if fleet is not None else []:
        counts = " · ".join(f"{k} {v}" for k, v in c.events.items())
        version = f" version `{c.version}`" if c.version else ""
        lines.append(f"- `{c.queue}`{version} (`{c.command[:80]}`): {counts or 'no worker events'}")
    backlog = fleet.backlog if fleet is not None else None
    if backlog is not None and backlog.samples:
        lines.append(f"- backlog: peak {backlog.peak} tasks over {backlog.samples} samples")
        for ev in backlog.events:
            drain = "never drained" if ev.drain_s is None else f"drained in {ev.drain_s:.1f} s"
            lines.append(f"  - after {ev.name}: peak {ev.peak}, {drain}")
    for name, stats in ((fleet.dependencies if fleet is not None else None) or {}).items():
        lines.append(
            f"- dependency `{name}`: " + " · ".join(f"{k} {v}" for k, v in stats.items() if isinstance(v, int | float))
        )
    for name, stats in ((fleet.models if fleet is not None else None) or {}).items():
        lines.append(f"- model endpoint `{name}`: {stats.get('requests')} request(s)")
        spells = stats.get("spells")
        lines += [f"  - {spell_line(s)}" for s in spells if isinstance(s, dict)] if isinstance(spells, list) else []
    restarts = [k.restart_s for k in report.kills if k.restart_s is not None]
    if restarts:
        lines.append(f"- runs resumed after each kill in {', '.join(f'{r:.2f} s' for r in restarts)}")
    return lines


def after_action(done: list[Experiment], title: str, settings: Settings, max_drain_s: float) -> tuple[str, JsonObject]:
    """(the Markdown report, its JSON: gameday.json as the schema writes it)."""
    ran = [e for e in done if e.scenario.skipped is None]
    held = all(e.held for e in done)
    fleet = ", ".join(f"`{m.queue}`: `{' '.join(m.cmd)[:100]}`" for m in settings.members) or "checkpoint-tui's worker"
    whose = (
        "this home's dev server"
        if settings.embedded
        else f"`{settings.temporal_address}`, a server the lab did not start"
    )
    md = [
        f"# Game day: {title}",
        "",
        f"Fleet: {fleet}. Temporal: {whose} (namespace `{settings.namespace}`). {len(ran)} experiments ran, "
        f"{sum(e.held for e in ran)} held. Verdict: **{'PASS' if held else 'FAIL'}**.",
        "",
        "| experiment | the guide | held | lost work | wall |",
        "|---|---|---|---|---|",
    ]
    for e in done:
        if e.scenario.skipped is not None:
            md.append(f"| {e.scenario.name} | {e.scenario.guide} | skipped: {e.scenario.skipped} | | |")
            continue
        lost = len(_lost(e.report))
        md.append(
            f"| {e.scenario.name} | {e.scenario.guide} | {'yes' if e.held else '**no**'} | {lost} | "
            f"{e.ended_at - e.started_at:.0f} s |"
        )
    md += ["", "## Recovery checklist", ""]
    for item, how in CHECKLIST:
        md.append(f"- {item} ({how}): {_checklist(ran, item)}")
    for e in ran:
        md += ["", f"## {e.scenario.name}: {e.scenario.guide}", "", f"Watch: {e.scenario.watch}.", ""]
        md += [f"- schedule: {ev.describe()}" for ev in e.scenario.events] or ["- no nemesis: load only"]
        md += _figures(e.report)
        failed = [c for c in e.checks if not c.ok]
        md += [f"- **FAIL** {c.name}: {c.observed[:400]}" for c in failed] or ["- every check held"]
        md += [f"- lost: {line[:400]}" for line in _lost(e.report)[:50]]
        md += [f"- recovered: {line[:400]}" for line in _recovered(e.report)[:50]]
    md += ["", "## What to change", ""] + (_advice(ran) or ["Nothing: every experiment held."])
    doc = GamedayReport(
        title=title, verdict="PASS" if held else "FAIL", max_drain_s=max_drain_s, experiments=[e.record() for e in done]
    )
    return "\n".join(md) + "\n", encode(doc)


def _checklist(ran: list[Experiment], item: str) -> str:
    bad = sorted({e.scenario.name for e in ran if _breaks(e, item)})
    return "held" if not bad else f"**not held** in {', '.join(bad)}"


def _breaks(e: Experiment, item: str) -> bool:
    """Whether the experiment broke the checklist's item, from what it is about: a lost activity timeout is
    an activity retry that did not behave, never a workflow task failure (the report's own counts)."""
    failed = [c.name for c in e.checks if not c.ok]
    lost = [a.lost_work for a in _runs(e.report) if a.lost_work is not None]
    if item.startswith("Workflows resume"):
        return any("COMPLETED" in name for name in failed)
    if item.startswith("No permanent"):
        return any("no progress" in name for name in failed) or any(u.lost for w in lost for u in w.task_failures)
    if item.startswith("Activity retries"):
        timeouts = any(u.lost for w in lost for u in w.timeouts)
        return timeouts or any(k in name for name in failed for k in ("duplicated", "at risk", "re-executed"))
    return any("backlog drains" in name for name in failed)


def _advice(ran: list[Experiment]) -> list[str]:
    """What to change, from what failed (the doctor's advice for a user's worker, in short)."""
    text = " ".join(f"{c.name} {c.observed}" for e in ran for c in e.checks if not c.ok).lower()
    out = []
    if any(w in text for w in ("graceful", "sigterm", "restart", "deploy of")) and "timed out" in text:
        out.append(
            "- A graceful stop lost tasks: give the worker a graceful_shutdown_timeout longer than your "
            "activities, heartbeat long activities and set a heartbeat timeout so a lost task is retried "
            "in seconds, not after its start-to-close timeout."
        )
    if "non-determinism" in text or "no progress" in text:
        out.append(
            "- A deploy broke determinism: gate deploys on `checkpoint-tui replay` of recorded histories, "
            "and use workflow.patched() or Worker Versioning for changes to in-flight workflows."
        )
    if "at risk" in text or "duplicated" in text:
        out.append(
            "- Re-executed side effects: route them through checkpoint_tui.effects (exactly_once) or an "
            "idempotency key the service honours."
        )
    if "drain" in text:
        out.append(
            "- The backlog drained slowly: more worker slots or workers per queue, or raise "
            "max_concurrent_activities / workflow tasks."
        )
    if text and not out:
        out.append("- See each experiment's failed checks and lost work above, and `checkpoint-tui doctor` on a run.")
    return out
