"""A worker in another language under the lab (#48): the mailer on Temporal's TypeScript SDK (node,
examples/ts_mailer/, installed by `make test` from the npm registry). Its outbox is named with
--effects: the blind tool is shown duplicating at the seeded after-effect crash point, the tool that is
exactly-once by its own means (no library) passes with its email once."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from itertools import count
from pathlib import Path

import pytest

from conftest import queue_of, run_cli
from test_user_workflow_lab import stop_lab

MAILER = Path(__file__).resolve().parent.parent / "examples" / "ts_mailer"
_homes = count()
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (MAILER / "node_modules" / "@temporalio" / "worker").is_dir(),
    reason="node, or examples/ts_mailer's packages (`make test` installs them with npm), not here",
)


def ts_chaos(
    folder: Path, script: str, home: Path, workflow: str, worker: str | None, *declared: str, address: str
) -> tuple:
    """Seed 1 of chaos (3 kills aimed at tools) on a TypeScript example in `folder`, its worker `node
    folder/script` (or `worker`, run from the folder), its outbox named, on the session's server
    (`address`); the report, the lab stopped."""
    path = home / "r.json"
    try:
        out = run_cli(
            *(
                "--home",
                str(home),
                "--worker-cmd",
                worker or f"node {folder / script}",
                "--task-queue",
                queue_of("ts", home),
                "--temporal-address",
                address,
            ),
            *declared,
            *("--effects", f"file:{home}/example-out", "chaos", "--workflow", workflow),
            *("--input", '{"turns": 5, "pace": 0.04, "think": 0.05}', "--seed", "1", "--kills", "3", "--aim", "tool"),
            *("--json", str(path)),
            timeout=240,
            cwd=folder if worker else None,
        )
        report = json.loads(path.read_text())
    finally:
        stop_lab(home)
    return out, report


def _chaos(home: Path, workflow: str, address: str, worker: str | None = None) -> tuple:
    return ts_chaos(MAILER, "worker.js", home, workflow, worker, "--model-activities", "think", address=address)


def outbox(home: Path) -> Counter:
    return Counter(line for f in (home / "example-out").iterdir() for line in f.read_text().splitlines())


def test_the_blind_typescript_tool_is_shown_duplicating_at_its_outbox(session_root, temporal_address):
    home = session_root / f"ts-blind-{next(_homes)}"
    out, report = _chaos(home, "TsMailer", temporal_address)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, emails = report["audit"], outbox(home)
    assert audit["duplicated"] == sum(n - 1 for n in emails.values()) >= 1, emails
    assert all(d["calls"] == [f"sendEmail activity {d['activity_ids'][0]}"] for d in audit["destination_duplicates"])
    assert any(k["kind"] == "worker-after-effect" and k["class"] == "other" for k in report["kills"])


def test_the_typescript_tool_exactly_once_by_its_own_means_passes_under_npm_run(session_root, temporal_address):
    """Run as node workers usually are, `npm run worker` (#50: it exited 3 after 30 s, blaming the task
    queue, while npm's process was not the one that polled): the lab follows npm to node."""
    home = session_root / f"ts-guarded-{next(_homes)}"
    out, report = _chaos(home, "TsMailerGuarded", temporal_address, "npm run worker")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert Counter(outbox(home).values()) == Counter({1: 5}) and audit["effects"] == 0  # no library
    assert len(audit["effect_once"]) >= 1 and audit["at_risk"] == [] and audit["lost_work_count"] == 0
    assert not (home / "example-out.tmp").exists() or not any((home / "example-out.tmp").iterdir())
