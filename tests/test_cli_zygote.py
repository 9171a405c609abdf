"""The tests' CLI fork server (tests/cli_zygote.py) gives what a fresh interpreter gives: the same exit
code, output and errors, its own working directory and environment; and a call past its deadline is
killed, as subprocess.run kills one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from checkpoint_tui.waiting import wait_until_sync
from cli_zygote import Zygote


@pytest.fixture
def zygote(tmp_path: Path):
    z = Zygote(tmp_path)
    try:
        yield z
    finally:
        z.stop()
    assert (z.proc is None or z.proc.poll() is not None) and not Path(z.path).exists()


def _fresh(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "checkpoint_tui", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, cwd=cwd)


@pytest.mark.parametrize(
    "args",
    [["--version"], ["--no-such-flag"], ["--home", "h", "stop"], ["--home", "h", "status", "--json"], ["chaos", "-h"]],
)
def test_a_fork_answers_as_a_fresh_interpreter(zygote: Zygote, tmp_path: Path, args: list[str]) -> None:
    env = {**os.environ, "COLUMNS": "100"}
    forked = zygote.run(args, env, tmp_path, 60)
    assert forked is not None, "the fork server did not start"
    fresh = _fresh(args, env, tmp_path)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert zygote.proc is not None and zygote.proc.poll() is None  # one server, every call


def test_a_call_that_sets_an_import_time_variable_gets_a_real_interpreter(zygote: Zygote, tmp_path: Path) -> None:
    for changed in ({"CHECKPOINT_HOST": "elsewhere"}, {"PYTHONWARNINGS": "error"}, {"LC_ALL": "C"}, {"TZ": "UTC"}):
        assert zygote.run(["--version"], {**os.environ, **changed}, tmp_path, 60) is None, changed
    assert zygote.run(["--version"], {**os.environ, "UNRELATED": "1"}, tmp_path, 60) is not None


def test_a_call_past_its_deadline_is_killed(zygote: Zygote, tmp_path: Path) -> None:
    """A deadline of 0 s: the call cannot have ended; it is SIGKILLed and reaped, nothing left."""
    assert zygote.run(["--version"], dict(os.environ), tmp_path, 60) is not None  # the server is up
    with pytest.raises(subprocess.TimeoutExpired):
        zygote.run(["--home", str(tmp_path / "h"), "status"], dict(os.environ), tmp_path, 0)
    assert zygote.proc is not None
    server = psutil.Process(zygote.proc.pid)
    assert wait_until_sync(lambda: not server.children(), 10, every=0.05)
