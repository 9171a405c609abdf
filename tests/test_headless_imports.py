"""The headless paths never import Textual (the core works without a terminal)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from checkpoint_tui import cli
import checkpoint_tui.proof.verify.harness, checkpoint_tui.proof.chaos.engine
import checkpoint_tui.cli.commands, checkpoint_tui.core.session
for argv in (["--verify", "--help"], ["--home", sys.argv[1], "status"], ["--home", sys.argv[1], "status", "--json"]):
    try:
        cli.run(argv)
    except SystemExit:
        pass
assert "textual" not in sys.modules, sorted(m for m in sys.modules if m.startswith("textual"))
print("no textual")
"""


def test_headless_commands_do_not_import_textual(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "no textual" in out.stdout
