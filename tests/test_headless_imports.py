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


PARSE_ONLY = """
import sys
from checkpoint_tui import cli
for argv in (["chaos", "--help"], ["chaso"], ["start", "--pace", "nan"], ["--bogus"]):
    try:
        cli.run(argv)
    except SystemExit:
        pass
heavy = ("temporalio", "checkpoint_tui.workloads", "checkpoint_tui.proof", "checkpoint_tui.cli.commands",
         "checkpoint_tui.ops", "checkpoint_tui.loop_worker.workflow", "httpx", "asyncio", "importlib.metadata")
found = sorted(m for m in sys.modules if m.startswith(heavy))
assert not found, found[:20]
print("parsed light")
"""


def test_parsing_help_and_usage_errors_import_nothing_heavy():
    """Every CLI process parses first: a command's --help and a usage error (exit 2) load no
    Temporal SDK, workload, proof, process control or asyncio (0.85 s of CPU a process before; 0.07 s
    after). Only a command that runs imports what it runs. (The top-level --help lists --framework's
    choices, and finding them imports every framework module.)"""
    out = subprocess.run([sys.executable, "-c", PARSE_ONLY], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "parsed light" in out.stdout


def test_our_loop_worker_starts_without_the_http_client():
    """Every worker start (and each spare's) imports the worker module: httpx, with the command line it
    pulls in (rich, click, pygments), was 60-90 ms of its CPU and is needed only when a model server is
    asked (the offline provider is the default)."""
    script = (
        "import sys, checkpoint_tui.loop_worker.worker\n"
        "print(sorted(m for m in sys.modules if m.startswith(('httpx', 'rich'))))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
