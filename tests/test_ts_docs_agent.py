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


def test_the_docs_agent_runs_under_every_command_with_a_python_agent_s_verdicts(tmp_path):
    folder = project(tmp_path / "notify")
    home = tmp_path / "lab"
    lab = ["--home", str(home), "--worker-cmd", "node worker.js"]

    def cli(*args: str, timeout: float = 240):
        return run_cli(*lab, *args, cwd=folder, timeout=timeout)

    def chaos(workflow: str) -> tuple:
        """The page's chaos line on `workflow`: seed 1, 3 kills aimed at tools; its output and report."""
        aimed = ("--aim", "tool", "--seed", "1", "--kills", "3", "--json", str(tmp_path / f"{workflow}.json"))
        out = cli("chaos", "--workflow", workflow, "--input", IN, *aimed)
        return out, json.loads((tmp_path / f"{workflow}.json").read_text())

    try:
        start = cli("start", "--workflow", "NotifyOnce", "--input", IN, "--wait")
        assert start.returncode == 0, start.stdout[-2000:] + start.stderr[-2000:]

        blind, report = chaos("Notify")
        assert blind.returncode == 1, blind.stdout[-3000:]
        assert re.search(
            r"DUPLICATED at file:.*hello, this is turn \d' 2 times, made by send \(activity \d+\)", blind.stdout
        )
        assert report["audit"]["framework"] == "declared" and report["audit"]["model_requests"] == 5

        guarded, guarded_report = chaos("NotifyOnce")
        audit = guarded_report["audit"]
        assert guarded.returncode == 0, guarded.stdout[-3000:]
        assert audit["effect_once"] and audit["at_risk"] == [] and "effect once" in guarded.stdout
        sent = lines(folder)
        dupes = {line for line, n in sent.items() if n > 1}
        assert dupes and all(line.startswith(report["run_id"]) for line in dupes)  # only the blind run's

        verify = cli("--verify", "--workflow", "NotifyOnce", "--input", IN, timeout=400)
        assert verify.returncode == 0 and "ALL CHECKS PASS" in verify.stdout, verify.stdout[-3000:]

        gameday = cli(
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

        status = run_cli("--home", str(home), "status", "--json", cwd=folder)
        assert status.returncode == 0 and json.loads(status.stdout)["audit"]["framework"] == "declared", status

        doctor = cli("doctor", "--workflow", "NotifyOnce", "--input", IN)
        assert doctor.returncode in (0, 1), doctor.stdout[-3000:] + doctor.stderr[-2000:]
        assert "heartbeatTimeout" in doctor.stdout and "activity.heartbeat()" not in doctor.stdout
    finally:
        run_cli("--home", str(home), "stop", timeout=120)
