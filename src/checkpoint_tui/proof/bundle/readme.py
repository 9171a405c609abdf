"""The index of a proof bundle: its README.md says what each file proves and how to re-check it,
with the bundle's own figures filled in."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from checkpoint_tui.core.view import Snapshot
from checkpoint_tui.proof.bundle.proof_run import ProofRun
from checkpoint_tui.proof.replay.histories import Recorded
from checkpoint_tui.proof.report.verify import VerifyReport

COUNT_DUPLICATES = (
    "python3 -c \"import csv; ids=[r['id'] for r in csv.DictReader(open('ledger/effects.csv'))]; "
    'print(len(ids) - len(set(ids)))"'
)
COUNT_OUTCOMES = (
    "python3 -c \"import csv, collections; print(collections.Counter(r['outcome'] for r in "
    "csv.DictReader(open('ledger/effect_outcomes.csv'))))\""
)


def index_text(
    directory: Path,
    run: ProofRun,
    run_ids: list[str],
    recorded: list[Recorded],
    main: Snapshot | None,
    with_svg: bool,
    markers: Sequence[str] = (),
) -> str:
    command, document, checks, home = run.command, run.document, run.checks, run.settings.home
    passed = sum(c.ok for c in checks)
    tally = f" (`passed` {document.passed} of `total` {document.total})" if isinstance(document, VerifyReport) else ""
    chained = sum(1 for r in recorded if r.index > 1)
    lines = [
        f"# Proof bundle: `{command}`",
        "",
        f"Written {time.strftime('%Y-%m-%d %H:%M:%S %Z')}: **{passed}/{len(checks)} checks passed** over "
        f"{len(run_ids)} run(s). Everything here was read back from the ledger and from Temporal's history "
        "after the runs ended, never from the memory of a process that could have died. Times are Unix "
        "seconds. Run the re-check commands inside this directory.",
        "",
        "| file | what it proves | how to re-check |",
        "|---|---|---|",
        f"| `report.json` | the JSON report: every check with the values it looked at{tally} | read it; "
        "`checks[].observed` holds each check's values |",
        "| `junit.xml` | the same checks as JUnit XML: one testcase per check, the observed values in "
        "`<system-out>`, a failing check as `<failure>` with its values | any JUnit reader (a CI test report) |",
        f"| `histories/` | {len(recorded)} workflow histories of {len(run_ids)} run(s) as Temporal recorded them "
        f"under the kills ({chained} of them later executions of a continue-as-new chain), one JSON file per execution "
        "(`<run>.<NN>.json`, the format of `temporal workflow show --output json`) | "
        f"`checkpoint-tui replay --from {directory}/histories`: they replay on the workflow code of a "
        "checkout, no server needed; commit them as a corpus to gate workflow changes |",
        "| `ledger/runs.csv` | each run's ledger row: status, steps, error, its first Temporal execution | "
        "compare with `report.json` |",
        "| `ledger/effects.csv` | one row per effect id (`<run>:<step>:<kind>`, kind file, db or email), stamped "
        "`applied_at`, with every claim outcome: no id twice means no effect was applied twice | "
        f"`{COUNT_DUPLICATES}` prints 0 |",
        "| `ledger/effect_outcomes.csv` | every claim attempt and its outcome: `applied`, `skipped` (already "
        "applied), `recovered` (a writer died between claim and stamp, redone), `interrupted` (that writer) | "
        f"`{COUNT_OUTCOMES}` |",
        "| `worker_events.csv` | what the supervisors saw: spawns, each SIGKILL with the observed signal, no exit "
        "code and `confirmed` gone, promotions of the warm spare, respawns, adoptions, the measured restart | "
        "the `detail` column is JSON |",
    ]
    if with_svg and main is not None:
        lines.append(
            f"| `screen.svg` | the app's final screen of the main run `{main.run_id}`, rendered headless from the "
            f"ledger and the recorded history; its status line reads: {completion_line(main)} | open it in a "
            f"browser; `checkpoint-tui --home {home} status {main.run_id}` prints the same figures |"
        )
    if with_svg and main is not None and markers:
        lines.append(kill_pictures_row(main, markers))
    lines += [
        "",
        "Re-run the whole proof with the command above (`--verify` uses its own home under `run/verify`; "
        "`chaos` takes the same `--seed` for the same schedule).",
        "",
    ]
    return "\n".join(lines)


def kill_pictures_row(main: Snapshot, markers: Sequence[str]) -> str:
    """The row of `kill-N.svg`: one picture per kill marker line, each line quoted whole (the pane is
    narrower than a line)."""
    names = "`, `".join(f"kill-{n}.svg" for n in range(1, len(markers) + 1))
    return (
        f"| `{names}` | the same screen with the history pane at each kill of `{main.run_id}`: the red marker "
        "line the app draws where the kill fell between two history events (which worker, what was in flight, "
        "how long history stayed silent): " + "; ".join(f"`{m}`" for m in markers) + " | the `kill` / `died` "
        "rows of `worker_events.csv` (`at`, `pid`) against the events around that time in `histories/` |"
    )


def completion_line(snap: Snapshot) -> str:
    """The sentence the SVG shows in the status bar (the app's and `status`'s own: Snapshot.completion_sentence);
    every number from the ledger snapshot."""
    live = f"run {snap.run_status or 'unknown'} — {snap.completed_steps}/{snap.total_steps} steps"
    return snap.completion_sentence() or live
