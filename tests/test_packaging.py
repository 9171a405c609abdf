"""A package people install: `pip wheel --no-deps .` builds a wheel holding everything the app reads at
run time (the stylesheet), the console script, and no path into this checkout; `--version` names the
installed distribution. The whole round trip (a clean venv outside the checkout passing `--verify`)
is the manual acceptance in docs/install.md: it starts a dev server, too slow for the suite."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "checkpoint_tui"
# Files the package reads beside its modules at run time; a wheel without them opens a broken app.
RUNTIME_DATA = ("checkpoint_tui/tui/app.tcss",)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
    subprocess.run(
        [*pip, "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=180,
    )  # no build isolation: hatchling comes from this venv, so the test needs no package index
    (built,) = out.glob("checkpoint_tui-*-py3-none-any.whl")
    return built


def test_the_wheel_holds_every_module_and_the_stylesheet(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in RUNTIME_DATA:
        assert data in names, data
    stylesheets = {f"checkpoint_tui/{p.relative_to(PACKAGE)}" for p in PACKAGE.rglob("*.tcss")}
    assert stylesheets <= names, stylesheets - names
    modules = {f"checkpoint_tui/{p.relative_to(PACKAGE)}" for p in PACKAGE.rglob("*.py")}
    assert modules <= names, sorted(modules - names)[:5]
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "docs/", "bench/"))]


def test_the_wheel_names_no_path_into_the_checkout(wheel):
    with zipfile.ZipFile(wheel) as z:
        leaks = [n for n in z.namelist() if str(ROOT).encode() in z.read(n)]
    assert not leaks, leaks


def test_the_wheel_has_the_console_script_and_the_extras(wheel):
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/entry_points.txt"))
        assert "checkpoint-tui = checkpoint_tui.cli:main" in z.read(info).decode()
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "Provides-Extra: agents" in metadata and "Provides-Extra: docs" in metadata
    assert "pydantic-ai-slim[temporal]" in metadata


def test_version_names_the_installed_distribution():
    done = subprocess.run(
        [sys.executable, "-m", "checkpoint_tui", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"checkpoint-tui {version('checkpoint-tui')}"
