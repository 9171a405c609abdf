"""An agent written only against the docs (#50): the three files and the package.json of
docs/typescript.md, copied out of the page into a project of their own (the SDK's packages from
examples/ts_mailer, installed by `make test`), run under the page's commands: start, chaos (the blind
tool named and duplicated at its outbox, the guarded one passing), --verify, gameday and doctor,
with what they print held to what a Python agent of the same shape gets."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "typescript.md"
PACKAGES = ROOT / "examples" / "ts_mailer" / "node_modules"
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (PACKAGES / "@temporalio" / "worker").is_dir(),
    reason="node, or examples/ts_mailer's packages (`make test` installs them with npm), not here",
)
IN = '{"turns": 5}'


def project(folder: Path) -> Path:
    """The page's files, as a reader would copy them: each ```js block named by its first line, and
    the package.json block."""
    text = PAGE.read_text()
    blocks = re.findall(r"```(js|json)\n(.*?)```", text, re.S)
    folder.mkdir(parents=True)
    names = []
    for lang, body in blocks:
        if lang == "js" and (first := re.match(r"// (\w+\.js)\n", body)):
            (folder / first.group(1)).write_text(body)
            names.append(first.group(1))
        elif lang == "json" and '"checkpoint-tui"' in body and '"dependencies"' in body:
            (folder / "package.json").write_text(body)
            names.append("package.json")
    assert sorted(names) == ["activities.js", "package.json", "worker.js", "workflows.js"], names
    (folder / "node_modules").symlink_to(PACKAGES)
    return folder


def lines(folder: Path) -> Counter:
    out = folder / "notify-out"
    return Counter(line for f in out.iterdir() for line in f.read_text().splitlines())


class DocsLab:
    """The page's project in a folder of its own, and its lab: `cli` runs the page's global flags (its
    home, `--worker-cmd "node worker.js"`) from the project's folder. Each test below has its own (the
    commands are the page's, split three ways so that each test stays well inside the suite's timeout on
    a loaded machine); `stop` ends it, even on failure."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.folder = project(tmp_path / "notify")
        self.home = tmp_path / "lab"

    def cli(self, *args: str, timeout: float = 240):
        return run_cli(
            "--home", str(self.home), "--worker-cmd", "node worker.js", *args, cwd=self.folder, timeout=timeout
        )

    def chaos(self, workflow: str) -> tuple:
        """The page's chaos line on `workflow`: seed 1, 3 kills aimed at tools; its output and report."""
        aimed = ("--aim", "tool", "--seed", "1", "--kills", "3", "--json", str(self.tmp / f"{workflow}.json"))
        out = self.cli("chaos", "--workflow", workflow, "--input", IN, *aimed)
        return out, json.loads((self.tmp / f"{workflow}.json").read_text())

    def stop(self) -> None:
        run_cli("--home", str(self.home), "stop", timeout=120)


@pytest.fixture
def docs_lab(tmp_path):
    lab = DocsLab(tmp_path)
    try:
        yield lab
    finally:
        lab.stop()


def test_the_docs_agent_starts_and_chaos_shows_the_blind_tool_duplicating_and_the_guarded_one_once(docs_lab):
    start = docs_lab.cli("start", "--workflow", "NotifyOnce", "--input", IN, "--wait")
    assert start.returncode == 0, start.stdout[-2000:] + start.stderr[-2000:]

    blind, report = docs_lab.chaos("Notify")
    assert blind.returncode == 1, blind.stdout[-3000:]
    assert re.search(
        r"DUPLICATED at file:.*hello, this is turn \d' 2 times, made by send \(activity \d+\)", blind.stdout
    )
    assert report["audit"]["framework"] == "declared" and report["audit"]["model_requests"] == 5

    guarded, guarded_report = docs_lab.chaos("NotifyOnce")
    audit = guarded_report["audit"]
    assert guarded.returncode == 0, guarded.stdout[-3000:]
    assert audit["effect_once"] and audit["at_risk"] == [] and "effect once" in guarded.stdout
    sent = lines(docs_lab.folder)
    dupes = {line for line, n in sent.items() if n > 1}
    assert dupes and all(line.startswith(report["run_id"]) for line in dupes)  # only the blind run's

    status = run_cli("--home", str(docs_lab.home), "status", "--json", cwd=docs_lab.folder)
    assert status.returncode == 0 and json.loads(status.stdout)["audit"]["framework"] == "declared", status


def test_the_docs_agent_passes_verify(docs_lab):
    verify = docs_lab.cli("--verify", "--workflow", "NotifyOnce", "--input", IN, timeout=400)
    assert verify.returncode == 0 and "ALL CHECKS PASS" in verify.stdout, verify.stdout[-3000:]


def test_the_docs_agent_holds_a_gameday_and_doctor_names_its_missing_heartbeat(docs_lab):
    gameday = docs_lab.cli(
        "gameday",
        "--workflow",
        "NotifyOnce",
        "--input",
        '{"turns": 40}',  # as the page's: runs still going when the fleet goes down at 2 s
        "--runs",
        "2",
        "--scenarios",
        "kill-all",
        "--down-s",
        "2",
        timeout=400,
    )
    assert gameday.returncode == 0 and "1/1 experiments held" in gameday.stdout, gameday.stdout[-3000:]

    doctor = docs_lab.cli("doctor", "--workflow", "NotifyOnce", "--input", IN)
    assert doctor.returncode in (0, 1), doctor.stdout[-3000:] + doctor.stderr[-2000:]
    assert "heartbeatTimeout" in doctor.stdout and "activity.heartbeat()" not in doctor.stdout
