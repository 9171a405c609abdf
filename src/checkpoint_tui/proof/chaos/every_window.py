"""`chaos --every-window`: every tool of a user's workflow, killed once in each crash point's window
(proof/nemeses/hop.py), a run of its own per window, and a table of what each kill did to that tool's
effect: tool × window → effect once, guarded, held (nothing ran again), DUPLICATED n, at risk, lost, or
not reached. It passes when every cell held; a cell no kill reached is named, never passed."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path

from checkpoint_tui.files import write_output
from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.proof.nemeses.hop import AFTER, BEFORE, HOP_KINDS, RECORDED
from checkpoint_tui.proof.report import Check
from checkpoint_tui.settings import Settings

WINDOWS = (BEFORE, AFTER, RECORDED)
MAX_TOOLS = 16  # tool types killed per window (one event each; the rest of a run's types are said)
HELD = ("effect once", "guarded", "held: nothing ran again")
NOT_REACHED = "not reached"


def schedule_for(kind: str) -> list[ChaosEvent]:
    """One window's events: each arms the hop for the next tool type not hit yet in the run (hop.Arming.fresh)."""
    return [ChaosEvent(k, kind, 0) for k in range(1, MAX_TOOLS + 1)]


def outcome(kill: dict, audit: dict) -> str:
    """What the kill did to its call's effect, from the round's audit (the destination's and the library's)."""
    aid = (str(kill.get("execution")), str(kill.get("activity_id")))  # activity ids repeat across workflows
    dups = [d for d in audit.get("destination_duplicates", []) if aid[1] in d["activity_ids"]]
    if dups and any(aid == (str(r["execution"]), str(r["activity_id"])) for r in audit.get("re_executed", [])):
        return f"DUPLICATED {sum(d['extra'] for d in dups)}"
    if audit.get("workflow_status") != "COMPLETED":
        return "lost"
    ids = {
        key: {(str(r["execution"]), str(r["activity_id"])) for r in audit.get(key, [])}
        for key in ("at_risk", "effect_once", "guarded_re_executed", "re_executed")
    }
    if aid in ids["at_risk"]:
        return "AT RISK"
    if aid in ids["guarded_re_executed"]:
        return "guarded"
    if aid in ids["effect_once"]:
        return "effect once"
    if kill["kind"] == RECORDED and aid not in ids["re_executed"]:
        return "held: nothing ran again"
    if aid in ids["re_executed"]:  # ran again outside any destination and the library: said, not passed
        return "AT RISK"
    return NOT_REACHED


def _tool(kill: dict) -> str:
    label = str(kill.get("label") or "?")
    parts = label.split(" · ")
    return " · ".join(parts[:2]) if parts[0] in ("tool", "mcp") and len(parts) > 1 else label


def table(rounds: dict[str, dict]) -> dict[str, dict[str, str]]:
    """{tool: {window kind: outcome}} over the rounds (a tool a round did not reach: NOT_REACHED)."""
    cells: dict[str, dict[str, str]] = {}
    for kind, report in rounds.items():
        for kill in report.get("kills", []):
            if kill["kind"] in HOP_KINDS:
                cells.setdefault(_tool(kill), {})[kind] = outcome(kill, report["audit"])
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


async def every_window(run_round: Callable[[str], Awaitable[dict]]) -> dict:
    """A round per window (`run_round(kind)` runs one chaos run of that window's events), then the table."""
    rounds = {kind: await run_round(kind) for kind in WINDOWS}
    cells = table(rounds)
    check = table_check(cells)
    return {
        "every_window": {"rounds": rounds, "table": cells},
        "checks": [{**check.__dict__}],
        "wall_s": sum(r["wall_s"] for r in rounds.values()),
    }


async def every_window_command(
    settings: Settings, seed: int, make_target: Callable[[], ChaosTarget], json_path: Path | None
) -> int:
    """Three chaos runs, one per crash point's window, each tool of the run killed once in it; then the table."""
    from checkpoint_tui.ops import devserver
    from checkpoint_tui.proof.chaos.command import say_taken_over, until_sigterm_said
    from checkpoint_tui.proof.chaos.engine import Chaos

    settings.ensure_dirs()
    say_taken_over(settings)
    devserver.ensure_devserver(settings)

    async def run_round(kind: str) -> dict:
        target = make_target()
        target.fresh_tools = True  # type: ignore[attr-defined]  # a user's workflow's target (checked by the CLI)
        chaos = Chaos(settings, seed, MAX_TOOLS + 1, schedule_for(kind), target)
        chaos.say_schedule = False  # sixteen events of one kind: the round's line says it
        print(f"window {kind}: each tool's next call killed there once", flush=True)
        report = await until_sigterm_said(chaos.run())
        a, failed = report["audit"], [c["name"] for c in report["checks"] if not c["ok"]]
        print(
            f"window {kind}: {len(report['kills'])} tool(s) killed · workflow {a['workflow_status']} · LOST "
            f"{a['lost']} · DUPLICATED {a['duplicated']} · {'PASS' if not failed else 'FAIL ' + '; '.join(failed)}",
            flush=True,
        )
        return report

    report = await every_window(run_round)
    for kind, rnd in report["every_window"]["rounds"].items():  # every round's checks count, named by window
        report["checks"] += [{**c, "name": f"{c['name']} ({kind})"} for c in rnd["checks"]]
    for line in table_lines(report["every_window"]["table"]):
        print(line)
    failed = [c for c in report["checks"] if not c["ok"]]
    for c in failed:
        print(f"FAIL  {c['name']}: {c['observed'][:600]}")
    path = json_path or settings.run_dir / f"chaos-every-window-seed{seed}.json"
    write_output(path, json.dumps(report, indent=2), "--json")
    print(f"wrote {path}")
    print(f"wall {report['wall_s']:.1f} s · verdict: {'PASS' if not failed else 'FAIL'}")
    return 0 if not failed else 1
