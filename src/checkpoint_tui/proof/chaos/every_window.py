"""`chaos --every-window`: every tool of a user's workflow, killed once in each crash point's window
(proof/nemeses/hop.py), a run of its own per window, and a table of what each kill did to that tool's
effect: tool × window → effect once, guarded, held (nothing ran again), DUPLICATED n, at risk, lost, or
not reached. It passes when every cell held; a cell no kill reached is named, never passed."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from checkpoint_tui.files import write_output
from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.nemeses.hop import AFTER, BEFORE, HOP_KINDS, RECORDED
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.audit import ActivityAuditRecord, AuditRecord
from checkpoint_tui.proof.report.chaos import ChaosReport, EveryWindow, EveryWindowReport, Fired
from checkpoint_tui.proof.report.codec import encode
from checkpoint_tui.settings import Settings

WINDOWS = (BEFORE, AFTER, RECORDED)
MAX_TOOLS = 16  # tool types killed per window (one event each; the rest of a run's types are said)
HELD = ("effect once", "guarded", "held: nothing ran again")
NOT_REACHED = "not reached"


def schedule_for(kind: str) -> list[ChaosEvent]:
    """One window's events: each arms the hop for the next tool type not hit yet in the run (hop.Arming.fresh)."""
    return [ChaosEvent(k, kind, 0) for k in range(1, MAX_TOOLS + 1)]


def outcome(kill: Fired, audit: AuditRecord | None) -> str:
    """What the kill did to its call's effect, from the round's audit (the destination's and the library's)."""
    if not isinstance(audit, ActivityAuditRecord):  # a user's workflow's rounds: an activity audit each
        return NOT_REACHED
    aid = (str(kill.execution), str(kill.activity_id))  # activity ids repeat across workflows
    dups = [d for d in audit.destination_duplicates if aid[1] in d.activity_ids]
    if dups and any(aid == r.id for r in audit.re_executed):
        return f"DUPLICATED {sum(d.extra for d in dups)}"
    if audit.workflow_status != "COMPLETED":
        return "lost"
    if aid in {r.id for r in audit.at_risk}:
        return "AT RISK"
    if aid in {r.id for r in audit.guarded_re_executed}:
        return "guarded"
    if aid in {r.id for r in audit.effect_once}:
        return "effect once"
    again = {r.id for r in audit.re_executed}
    if kill.kind == RECORDED and aid not in again:
        return "held: nothing ran again"
    if aid in again:  # ran again outside any destination and the library: said, not passed
        return "AT RISK"
    return NOT_REACHED


def _tool(kill: Fired) -> str:
    label = kill.label or "?"
    parts = label.split(" · ")
    return " · ".join(parts[:2]) if parts[0] in ("tool", "mcp") and len(parts) > 1 else label


def table(rounds: dict[str, ChaosReport]) -> dict[str, dict[str, str]]:
    """{tool: {window kind: outcome}} over the rounds (a tool a round did not reach: NOT_REACHED)."""
    cells: dict[str, dict[str, str]] = {}
    for kind, report in rounds.items():
        for kill in report.kills:
            if kill.kind in HOP_KINDS:
                cells.setdefault(_tool(kill), {})[kind] = outcome(kill, report.audit)
    for row in cells.values():
        for kind in rounds:
            row.setdefault(kind, NOT_REACHED)
    return cells


def table_check(cells: dict[str, dict[str, str]]) -> Check:
    bad = [f"{tool} × {kind}: {out}" for tool, row in cells.items() for kind, out in row.items() if out not in HELD]
    seen = f"{len(cells)} tool(s) × {len(WINDOWS)} windows" + "".join(f"; {b}" for b in bad[:20])
    return Check(
        "chaos: every tool held in every window",
        bool(cells) and not bad,
        seen if cells else "no tool call was reached in any window",
    )


def table_lines(cells: dict[str, dict[str, str]]) -> list[str]:
    width = max([len(t) for t in cells] + [4])
    head = f"{'tool':<{width}}  " + "  ".join(f"{k.removeprefix('worker-'):<22}" for k in WINDOWS)
    rows = [
        f"{tool[:80]:<{width}}  " + "  ".join(f"{row.get(k, NOT_REACHED):<22}" for k in WINDOWS)
        for tool, row in sorted(cells.items())
    ]
    return [head, *rows]


async def every_window(run_round: Callable[[str], Awaitable[ChaosReport]]) -> EveryWindowReport:
    """A round per window (`run_round(kind)` runs one chaos run of that window's events), then the table;
    the checks are the table's, then every round's, named by window."""
    rounds = {kind: await run_round(kind) for kind in WINDOWS}
    cells = table(rounds)
    checks = [table_check(cells)]
    checks += [replace(c, name=f"{c.name} ({kind})") for kind, rnd in rounds.items() for c in rnd.checks]
    return EveryWindowReport(
        every_window=EveryWindow(rounds=rounds, table=cells),
        checks=checks,
        wall_s=sum(r.wall_s for r in rounds.values()),
    )


async def every_window_command(
    settings: Settings, seed: int, make_target: Callable[[], ChaosTarget], json_path: Path | None
) -> int:
    """Three chaos runs, one per crash point's window, each tool of the run killed once in it; then the table."""
    from checkpoint_tui.ops.temporal import reach
    from checkpoint_tui.proof.chaos.command import say_taken_over, until_sigterm_said
    from checkpoint_tui.proof.chaos.engine import Chaos

    settings.ensure_dirs()
    say_taken_over(settings)
    await reach(settings)

    async def run_round(kind: str) -> ChaosReport:
        target = make_target()
        target.fresh_tools = True  # type: ignore[attr-defined]  # a user's workflow's target (checked by the CLI)
        chaos = Chaos(settings, seed, MAX_TOOLS + 1, schedule_for(kind), target)
        chaos.say_schedule = False  # sixteen events of one kind: the round's line says it
        print(f"window {kind}: each tool's next call killed there once", flush=True)
        report = await until_sigterm_said(chaos.run())
        failed = [c.name for c in report.checks if not c.ok]
        a = report.audit
        status, lost, duplicated = (a.workflow_status, a.lost, a.duplicated) if a is not None else (None, 0, 0)
        print(
            f"window {kind}: {len(report.kills)} tool(s) killed · workflow {status} · LOST "
            f"{lost} · DUPLICATED {duplicated} · {'PASS' if not failed else 'FAIL ' + '; '.join(failed)}",
            flush=True,
        )
        return report

    report = await every_window(run_round)
    for line in table_lines(report.every_window.table):
        print(line)
    failed = [c for c in report.checks if not c.ok]
    for c in failed:
        print(f"FAIL  {c.name}: {c.observed[:600]}")
    path = json_path or settings.run_dir / f"chaos-every-window-seed{seed}.json"
    write_output(path, json.dumps(encode(report), indent=2), "--json")
    print(f"wrote {path}")
    print(f"wall {report.wall_s:.1f} s · verdict: {'PASS' if not failed else 'FAIL'}")
    return 0 if not failed else 1
