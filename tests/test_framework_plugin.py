"""A framework from outside this repository (tests/toy_framework/, a package of its own) plugs in by being
installed: built into a wheel with this venv's hatchling, installed into a folder with pip (no index),
and put on the path of the lab's commands. chaos then names the example worker's activities by it, and
aims at them as its tool calls. A broken plugin is left out with a warning, never a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from itertools import count
from pathlib import Path

import pytest

from conftest import run_cli
from test_user_workflow_lab import lab_flags, stop_lab

TOY = Path(__file__).resolve().parent / "toy_framework"
_homes = count()


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy framework, installed as a user installs a package: its wheel into a folder of its own."""
    root = tmp_path_factory.mktemp("toy")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    build = [*pip, "wheel", "--no-index", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"), str(TOY)]
    subprocess.run(build, check=True, capture_output=True, timeout=120)
    (wheel,) = (root / "dist").glob("toy_framework-*.whl")
    site = root / "site"
    subprocess.run(
        [*pip, "install", "--no-index", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (site / "toy_framework.py").exists() and list(site.glob("toy_framework-*.dist-info/entry_points.txt"))
    return site


def with_path(site: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}


def names_seen(env: dict[str, str] | None = None) -> tuple[list[str], str]:
    code = "from checkpoint_tui.frameworks import names; print(' '.join(names()))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.split(), out.stderr


def test_an_installed_framework_is_registered_beside_ours(toy_site: Path):
    without, _ = names_seen()
    found, warned = names_seen(with_path(toy_site))
    assert "toy" not in without and set(without) < set(found) and "toy" in found, (without, found)
    assert {"pydantic-ai", "openai-agents", "langgraph", "strands", "google-adk", "deepagents"} <= set(without)
    assert warned == ""


def test_chaos_names_and_aims_at_the_installed_framework_s_tools(
    toy_site: Path, session_root: Path, temporal_address: str
):
    """The unguarded example's sends are the toy's tool calls: aimed at as tools, named `toy-send` with
    their call ids, at risk once re-executed (nothing guards them), and the verdict FAIL."""
    home = session_root / f"toy-{next(_homes)}"
    report_path = home / "r.json"
    args = ["--workflow", "SendLinesUnguarded", "--input", '{"count": 4, "pace": 0.3}', "--aim", "tool"]
    try:
        out = run_cli(
            *lab_flags(home, address=temporal_address),
            "chaos",
            *args,
            "--kills",
            "3",
            "--json",
            str(report_path),
            env=with_path(toy_site),
            timeout=240,
        )
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    finally:
        stop_lab(home)
    assert report is not None, out.stdout[-3000:] + out.stderr[-3000:]
    audit = report["audit"]
    assert report["framework"] == "toy" and audit["framework"] == "toy", out.stdout[-3000:]
    assert audit["tool_calls"] == 4 and audit["model_requests"] == 0
    inside = [k for k in report["kills"] if k.get("landed") == "inside"]
    assert inside, (
        report["kills"],
        report["not_fired"],
        out.stdout[-3000:],
    )  # aimed at the toy's tool calls: there were some to aim at
    risky = audit["at_risk"]
    assert risky and all(r["tool"] == "toy-send" and r["call_id"].startswith("line-") for r in risky), risky
    assert out.returncode == 1 and "toy-send · call line-" in out.stdout


def test_a_broken_plugin_is_left_out_with_one_warning(tmp_path: Path):
    """An entry point whose module fails to import, and one that is no framework: the others stay."""
    site = tmp_path / "site"
    dist = site / "broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[checkpoint_tui.frameworks]\nboom = broken_boom\nbare = broken_bare\n")
    (site / "broken_boom.py").write_text("raise RuntimeError('at import')\n")
    (site / "broken_bare.py").write_text("NAME = 'pydantic-ai'\n")  # a name of ours, and no interface
    ours, _ = names_seen()
    found, warned = names_seen(with_path(site))
    assert found == ours and "pydantic-ai" in found, found  # the bare module took no name of ours
    assert "boom" in warned and "failed to import (RuntimeError)" in warned and "bare" in warned, warned


def test_detection_does_not_depend_on_the_order_frameworks_are_asked_in(monkeypatch: pytest.MonkeyPatch):
    """ADK's `invoke_model` with its payloads against Strands' bare one; Deep Agents' types against
    LangGraph's `<graph>.<node>` shape: each framework in every rotation of the registry, one answer."""
    from itertools import permutations

    import test_deepagents_classify as deep
    import test_google_adk_classify as adk
    from checkpoint_tui.frameworks import detect, registry
    from checkpoint_tui.frameworks.units import ActivitySeen

    cases = {
        "google-adk": [adk.seen("invoke_model", adk.request(), adk.ANSWER)],
        "strands": [ActivitySeen("invoke_model", [], None, None)],
        "deepagents": [deep.seen("deepagents.invoke_model", [deep.MODEL_IN], {"message": deep.ASKS}, None)],
        "langgraph": ["mailer.agent", "mailer.tools"],
        "pydantic-ai": ["agent__a__model_request"],
    }
    every = registry.frameworks()
    for order in list(permutations(every))[:: max(1, len(list(permutations(every))) // 40)]:
        monkeypatch.setattr(registry, "frameworks", lambda order=order: order)
        assert {name: detect(seen) for name, seen in cases.items()} == {n: n for n in cases}, [f.NAME for f in order]


def test_a_plugin_whose_classify_breaks_is_generic_and_said_once(monkeypatch: pytest.MonkeyPatch, caplog):
    """Its activities are "other" (at risk once re-executed: a broken plugin fails a verdict, never passes
    one), and the warning comes once however often a live run is classified."""
    import types

    from checkpoint_tui.frameworks import classify, registry
    from checkpoint_tui.frameworks.units import ActivitySeen

    def boom(seen):
        raise RuntimeError("a plugin's bug")

    broken = types.SimpleNamespace(NAME="broken-toy", LANGUAGE="python", recognises=lambda s: 0, classify=boom)
    monkeypatch.setattr(registry, "frameworks", lambda: (broken,))
    seen = [ActivitySeen("send_line", [{"index": 1}], None, None)]
    for _ in range(3):
        [unit] = classify("broken-toy", seen)
        assert unit.cls == "other"
    said = [r.getMessage() for r in caplog.records if "broken-toy" in r.getMessage()]
    assert len(said) == 1 and "failed to classify (RuntimeError)" in said[0], said
