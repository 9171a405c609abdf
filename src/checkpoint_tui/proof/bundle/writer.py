"""`--junit PATH` and `--proof DIR` of `--verify` and `chaos`: the checks as JUnit XML, and a bundle a
reviewer or a CI artifact store keeps: the JSON report, the JUnit file, every run's history (each
execution of its chain), the ledger's rows for those runs as CSV, the worker events, the app's final
screen of the main run as SVG (and one SVG per kill, the history pane at that kill's marker line),
and a README.md saying what each file proves and how to re-check it. Everything in it is read back
from the ledger and Temporal after the runs ended."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Protocol

from checkpoint_tui.core.history import to_history_event, workflow_status
from checkpoint_tui.core.kill_marker import marker_lines
from checkpoint_tui.core.snapshot import build_snapshot
from checkpoint_tui.core.view import Snapshot, View
from checkpoint_tui.files import OutputDir
from checkpoint_tui.files.outputs import check_output_dir
from checkpoint_tui.ledger import inspect_queries, queries
from checkpoint_tui.ledger.backend import Ledger
from checkpoint_tui.ledger.rows import ClaimAttempt, EffectRow, RunRow, WorkerEvent
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.state import SupervisorState
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.proof.bundle.proof_run import ProofRun
from checkpoint_tui.proof.bundle.readme import completion_line, index_text
from checkpoint_tui.proof.junit import junit_xml, write_junit
from checkpoint_tui.proof.replay.histories import Recorded, export
from checkpoint_tui.proof.report.codec import encode
from checkpoint_tui.settings import Settings

HISTORY_KEEP = 2000  # what the history pane keeps on screen
HISTORIES, LEDGER = "histories", "ledger"  # the bundle's subfolders
SUBDIRS = (HISTORIES, LEDGER)


class Screenshot(Protocol):
    """Renders a View headless with a status message and saves it as SVG at `path`, plus `kill-N.svg`
    in `markers` for each kill marker line of its history pane; returns the files written
    (tui/screenshot.save_svg, passed in by the CLI: nothing below tui/ may import Textual)."""

    async def __call__(self, view: View, message: str, path: Path, *, markers: Path | None = None) -> list[Path]: ...


@dataclass(frozen=True)
class ProofOutputs:
    junit: Path | None = None
    bundle: Path | None = None
    screenshot: Screenshot | None = None

    def __post_init__(self) -> None:
        if self.bundle is not None:  # its subfolders too, before the run (they were refused after it)
            check_output_dir(self.bundle, "--proof", SUBDIRS)

    @property
    def wanted(self) -> bool:
        return self.junit is not None or self.bundle is not None


async def emit(outputs: ProofOutputs, run: ProofRun) -> None:
    if outputs.junit is not None:
        write_junit(outputs.junit, run.command, run.checks, run.properties, run.wall_s)
        print(f"wrote {outputs.junit}")
    if outputs.bundle is not None:
        files = await write_bundle(outputs.bundle, run, outputs.screenshot)
        print(f"wrote the proof bundle {outputs.bundle} ({len(files)} files; see its README.md)")


async def write_bundle(directory: Path, run: ProofRun, screenshot: Screenshot | None) -> list[Path]:
    """Every file through one descriptor of `directory` (files.OutputDir: a link planted inside is
    replaced, never followed); files of an earlier bundle there that this one did not write again are
    removed if they are regular files its manifest names."""
    with OutputDir(directory, "the proof bundle") as out:
        files = await _fill(out, run, screenshot)
        out.replace_manifest()
    return files


async def _fill(out: OutputDir, run: ProofRun, screenshot: Screenshot | None) -> list[Path]:
    conn = connect(run.settings.ledger)
    run_ids = run.run_ids if run.run_ids is not None else queries.run_ids(conn, run.settings.task_queue)
    files = [
        out.write("report.json", json.dumps(encode(run.document), indent=2)),
        out.write("junit.xml", junit_xml(run.command, run.checks, run.properties, run.wall_s)),
    ]
    address, _ = resolve_address(run.settings)
    client = await connect_client(run.settings, address)
    from checkpoint_tui.proof.replay.command import chains  # the SDK's replayer: loaded when a bundle is written

    recorded = await chains(client, run_ids, conn, None, strict=False)
    files += export(recorded, out.subdir(HISTORIES))
    files += _ledger_csvs(conn, run_ids, out)
    main = run_ids[0] if run_ids else None
    snap, markers = None, []
    if main is not None:
        snap = build_snapshot(conn, run.settings, main, await workflow_status(client, main))
        if screenshot is not None:
            row = queries.run(conn, main)
            view = _view(snap, recorded, address, run.settings, row.ended_at if row else None)
            view.kills = inspect_queries.kill_events(conn, main, served=True)  # marked as the app marks them
            written = await _screens(out, screenshot, view, completion_line(snap))
            files += written
            whole = bool(view.history) and view.history[0].event_id == 1  # as the pane decides
            markers = marker_lines(view.kills, view.history, whole)[: sum(p.name.startswith("kill-") for p in written)]
    with_svg = screenshot is not None and snap is not None
    readme = out.write("README.md", index_text(out.path, run, run_ids, recorded, snap, with_svg, markers))
    return [readme, *files]


async def _screens(out: OutputDir, screenshot: Screenshot, view: View, message: str) -> list[Path]:
    """The SVGs are rendered into a fresh private folder of the bundle, then renamed into place (the
    renderer opens paths itself; there, no link can have been planted)."""
    with out.scratch() as scratch:
        written = await screenshot(view, message, scratch / "screen.svg", markers=scratch)
        return out.adopt(scratch, [p.name for p in written])


def _view(snap: Snapshot, recorded: list[Recorded], address: str, settings: Settings, ended: float | None) -> View:
    """The screen as the run ended: its whole recorded history, the worker events up to its end (later
    runs of the same home spawn and adopt workers too)."""
    history = [
        to_history_event(ev, rec.index - 1)
        for rec in recorded
        if rec.workflow_id == snap.run_id
        for ev in rec.history.events
    ]
    if ended is not None:
        snap = replace(snap, worker_events=[e for e in snap.worker_events if e.at <= ended])
    return View(
        snapshot=snap,
        history=history[-HISTORY_KEEP:],
        run_changed=True,
        address=address,
        namespace=settings.namespace,
        supervisor_state=SupervisorState.STOPPED,
        owns_home=True,
        ledger=settings.ledger_label if settings.ledger_url else None,
    )


def _ledger_csvs(conn: Ledger, run_ids: list[str], out: OutputDir) -> list[Path]:
    ledger = out.subdir(LEDGER)
    runs = [r for r in (queries.run(conn, run_id) for run_id in run_ids) if r is not None]
    effects = [{"run_id": run_id, **asdict(e)} for run_id in run_ids for e in queries.effects(conn, run_id)]
    attempts = [{"run_id": run_id, **asdict(a)} for run_id in run_ids for a in queries.claim_attempts(conn, run_id)]
    events: dict[int, dict] = {}
    for run_id in run_ids:  # each run's events and those of no run (spawns, adoptions), once each
        for e in queries.worker_events(conn, run_id, limit=1_000_000):
            events[e.id] = asdict(e)
    return [
        ledger.write("runs.csv", _csv(_columns(RunRow), [asdict(r) for r in runs])),
        ledger.write("effects.csv", _csv(["run_id", *_columns(EffectRow)], effects)),
        ledger.write("effect_outcomes.csv", _csv(["run_id", *_columns(ClaimAttempt)], attempts)),
        out.write("worker_events.csv", _csv(_columns(WorkerEvent), [events[k] for k in sorted(events)])),
    ]


def _columns(row_type: type) -> list[str]:
    return [f.name for f in fields(row_type)]


def _csv(columns: list[str], rows: Iterable[dict]) -> str:
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns)
    writer.writeheader()  # also for no rows: a reader sees the columns
    writer.writerows(rows)
    return text.getvalue()
