"""`checkpoint-tui ... gameday`: the guide's scenarios (proof/gameday/scenarios.py) against the user's
fleet, one at a time, each a chaos run of its own (the same engine as `chaos`); each experiment's start
and end recorded, its checks, and a per-experiment proof folder: the chaos report, its JUnit, every
run's history, the backlog samples and the worker events. Then the after-action report
(proof/gameday/report.py) in the guide's terms. Exit 0 only if every experiment that ran held."""

from __future__ import annotations

import csv
import io
import json
import time
from pathlib import Path

from checkpoint_tui.core.workload import Workload
from checkpoint_tui.files import OutputDir
from checkpoint_tui.ledger.fleet_queries import worker_events_between
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.sigterm import until_sigterm
from checkpoint_tui.ops.temporal import reach
from checkpoint_tui.proof.chaos.engine import Chaos
from checkpoint_tui.proof.chaos.printing import print_report
from checkpoint_tui.proof.gameday.report import Experiment, after_action, scenario_checks
from checkpoint_tui.proof.gameday.scenarios import Scenario
from checkpoint_tui.proof.junit import junit_xml
from checkpoint_tui.proof.replay.histories import export, fetch_chain
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.codec import encode
from checkpoint_tui.settings import Settings

SUBDIRS = ("histories",)


async def gameday(
    settings: Settings,
    workload: Workload,
    target_of,
    scenarios: list[Scenario],
    out: Path,
    runs: int,
    seed: int,
    max_drain_s: float,
    steps: int = 0,
) -> int:
    """Run each scenario; write the after-action report under `out`; 0 if every one held, else 1."""
    settings.ensure_dirs()
    await reach(settings)
    done: list[Experiment] = []
    with OutputDir(out, "--out") as folder:
        for scenario in scenarios:
            exp = Experiment(scenario)
            done.append(exp)
            if scenario.skipped is not None:
                print(f"== {scenario.name}: skipped ({scenario.skipped})", flush=True)
                continue
            print(f"== {scenario.name}: {scenario.guide}", flush=True)
            chaos = Chaos(settings, seed, steps, scenario.events, target_of(seed), scenario.runs or runs, scenario.rate)
            exp.started_at = time.time()
            stopped = (
                f"gameday: stopped by SIGTERM during {scenario.name}; its supervisor (and your worker commands) stopped"
            )
            exp.report = await until_sigterm(chaos.run(), stopped)
            exp.ended_at = time.time()
            print_report(exp.report, chaos.target)
            exp.checks = scenario_checks(exp.report, max_drain_s)
            await _bundle(folder.subdir(scenario.name), chaos, exp)
        md, doc = after_action(done, workload.title(), settings, max_drain_s)
        folder.write("gameday.md", md)
        folder.write("gameday.json", json.dumps(doc, indent=1))
        checks = [Check(f"{e.scenario.name}: {c.name}", c.ok, c.observed, c.numbers) for e in done for c in e.checks]
        folder.write("gameday.junit.xml", junit_xml("checkpoint-tui gameday", checks))
    held = all(e.held for e in done)
    ran = [e for e in done if e.scenario.skipped is None]
    print(
        f"gameday: {sum(e.held for e in ran)}/{len(ran)} experiments held · wrote {out / 'gameday.md'} "
        f"(and gameday.json, gameday.junit.xml, one folder per experiment) · verdict: "
        f"{'PASS' if held else 'FAIL'}",
        flush=True,
    )
    return 0 if held else 1


async def _bundle(folder: OutputDir, chaos: Chaos, exp: Experiment) -> None:
    """The experiment's proof: its report and JUnit, every run's history, its backlog samples and the
    worker events of its span; all read back from Temporal, the ledger and run/ after it ended."""
    with folder:
        folder.write("report.json", json.dumps(encode(exp.record()), indent=1))
        folder.write("junit.xml", junit_xml(f"gameday {exp.scenario.name}", exp.checks))
        histories = folder.subdir("histories")
        for run_id in chaos.run_ids:
            try:
                export(await fetch_chain(chaos.client, run_id), histories)
            except Exception as err:  # NoHistory: one Temporal no longer has; said in the folder
                histories.write(f"{run_id}.missing.txt", f"{str(err)[:300]}\n")
        samples = exp.report.fleet.backlog_samples if exp.report.fleet is not None else None
        if samples and Path(samples).is_file():
            folder.write("backlog.jsonl", Path(samples).read_bytes()[: 8 * 1024 * 1024])
        rows = worker_events_between(connect(chaos.settings.ledger), exp.started_at, exp.ended_at)
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(["at", "event", "pid", "identity", "detail"])
        writer.writerows([[r.at, r.event, r.pid, r.identity, r.detail] for r in rows])
        folder.write("worker-events.csv", text.getvalue())
