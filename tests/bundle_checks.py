"""What every proof bundle (`--proof DIR` of --verify and chaos) must hold, checked from its files only;
shared by tests/test_verify.py and tests/test_chaos.py, which each produce one."""

from __future__ import annotations

import csv
import html
import json
import xml.etree.ElementTree as ET
from pathlib import Path

from junitparser import Failure, JUnitXml

from conftest import run_cli

FILES = (
    "README.md",
    "report.json",
    "junit.xml",
    "ledger/runs.csv",
    "ledger/effects.csv",
    "ledger/effect_outcomes.csv",
    "worker_events.csv",
    "screen.svg",
)


def assert_junit_matches(path: Path, checks: list[dict]) -> None:
    """The JUnit file counts the same passes and failures as the JSON report, read by a JUnit reader
    and by the standard library's XML parser alike."""
    xml = JUnitXml.fromfile(str(path))
    cases = [case for suite in xml for case in suite]
    failed = {c.name for c in cases if any(isinstance(r, Failure) for r in c.result)}
    assert [c.name for c in cases] == [c["name"] for c in checks]
    assert failed == {c["name"] for c in checks if not c["ok"]}
    assert (xml.tests, xml.failures, xml.errors) == (len(checks), len(failed), 0)
    root = ET.parse(path).getroot()
    assert len(list(root.iter("testcase"))) == len(checks)
    assert len(list(root.iter("failure"))) == len(failed)
    for case, check in zip(root.iter("testcase"), checks, strict=True):
        assert check["observed"] in case.findtext("system-out")


def assert_bundle(bundle: Path, checks: list[dict], cases: list[dict] | None = None) -> list[str]:
    """Returns the bundle's run ids. `cases`: the JUnit file's cases when they are more than the
    report's checks (chaos adds one per kill window)."""
    for name in FILES:
        assert (bundle / name).is_file(), f"missing {name}"
    assert_junit_matches(bundle / "junit.xml", checks if cases is None else cases)
    assert json.loads((bundle / "report.json").read_text())["checks"] == checks
    runs = [r["run_id"] for r in csv.DictReader((bundle / "ledger/runs.csv").open())]
    histories = sorted((bundle / "histories").glob("*.json"))
    assert runs and {p.name.rsplit(".", 2)[0] for p in histories} == set(runs)  # every run's history
    ids = [r["id"] for r in csv.DictReader((bundle / "ledger/effects.csv").open())]
    assert ids and len(ids) == len(set(ids))  # no effect id twice
    outcomes = {r["outcome"] for r in csv.DictReader((bundle / "ledger/effect_outcomes.csv").open())}
    assert "applied" in outcomes
    assert any(r["event"] == "spawn" for r in csv.DictReader((bundle / "worker_events.csv").open()))
    screen = html.unescape((bundle / "screen.svg").read_text()).replace("\xa0", " ")
    assert screen.lstrip().startswith("<svg") and runs[0] in screen
    assert "run completed — " in screen and "duplicates 0 · applied exactly once across" in screen
    readme = (bundle / "README.md").read_text()
    assert all(f"`{name.split('/')[-1]}`" in readme or f"`{name}`" in readme for name in FILES if name != "README.md")
    assert_kill_pictures(bundle, runs[0], readme)
    assert f"checkpoint-tui replay --from {bundle}/histories" in readme

    nowhere = str(bundle.parent / "no-home")  # no ledger, no server: the files are enough
    replay = run_cli("--home", nowhere, "replay", "--from", str(bundle / "histories"), timeout=90)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert f"REPLAY PASS — {len(histories)}/{len(histories)}" in replay.stdout
    return runs


def assert_kill_pictures(bundle: Path, main_run: str, readme: str) -> None:
    """Each kill or death of a worker in the main run is pictured: `kill-N.svg` shows the history pane at
    the red marker line the live app draws (naming the dead pid), and the README quotes those lines."""
    deaths = [
        r
        for r in csv.DictReader((bundle / "worker_events.csv").open())
        if r["run_id"] == main_run and r["event"] in ("kill", "died")
    ]
    pictures = sorted(bundle.glob("kill-*.svg"))
    if not deaths:
        assert pictures == []
        return
    assert pictures and len(pictures) <= len(deaths), (pictures, deaths)
    pids = {r["pid"] for r in deaths}
    for n, picture in enumerate(pictures, start=1):
        assert picture.name == f"kill-{n}.svg" and f"`kill-{n}.svg`" in readme
        screen = html.unescape(picture.read_text()).replace("\xa0", " ")
        assert "── SIGKILL worker" in screen or "── died" in screen, picture
        named = [pid for pid in pids if f"worker {pid}" in screen]
        assert named, f"{picture.name} names none of the dead pids {pids}"
        assert "in flight: " in screen  # the pane is narrower than the line: the README quotes it whole
    assert readme.count("`── ") == len(pictures) and readme.count("next event +") >= len(pictures)
