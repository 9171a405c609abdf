"""The headless paths never import Textual (the core works without a terminal)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import checkpoint_tui

PKG = Path(checkpoint_tui.__file__).parent

SCRIPT = """
import sys
from checkpoint_tui import cli
import checkpoint_tui.verify, checkpoint_tui.headless, checkpoint_tui.session
for argv in (["--verify", "--help"], ["--home", sys.argv[1], "status"], ["--home", sys.argv[1], "status", "--json"]):
    try:
        cli._main(argv)
    except SystemExit:
        pass
assert "textual" not in sys.modules, sorted(m for m in sys.modules if m.startswith("textual"))
print("no textual")
"""


def test_headless_commands_do_not_import_textual(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "no textual" in out.stdout


def test_only_tui_package_imports_textual():
    offenders = []
    for path in PKG.rglob("*.py"):
        if "tui" in path.relative_to(PKG).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] == "textual":
                    offenders.append(f"{path.name}: {name}")
                # only the CLI may reach into the TUI (lazily, to open it)
                if name.startswith("checkpoint_tui.tui") and path.name != "cli.py":
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []
