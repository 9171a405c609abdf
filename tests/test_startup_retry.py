"""A worker command whose first start dies before it polls is given its replacement (the supervisor's), once:
on a loaded machine a node worker's connect to chaos's hop timed out before the hop's first frame and
chaos said the command could not start while its replacement was about to poll. A command that dies
again is still one line, exit 3, naming both starts."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from conftest import queue_of, run_cli
from test_user_workflow_lab import WORKER_CMD, stop_lab

FLAKY = """#!/bin/sh
# The first start fails a second in, as a connect that timed out would; every later one runs the worker.
mark="$1"; shift
if [ ! -e "$mark" ]; then : > "$mark"; sleep 1; echo "first start: failing on purpose" >&2; exit 1; fi
exec "$@"
"""


def _chaos(home: Path, address: str, cmd: str) -> tuple:
    flags = ["--home", str(home), "--temporal-address", address, "--worker-cmd", cmd]
    flags += ["--task-queue", queue_of("retry", home)]
    try:
        out = run_cli(
            *flags,
            "chaos",
            *("--workflow", "SendLines", "--input", json.dumps({"count": 4, "pace": 0.1})),
            *("--seed", "1", "--kills", "3", "--json", str(home / "r.json")),
            timeout=180,
        )
    finally:
        stop_lab(home)
    return out


def test_a_first_start_that_dies_before_it_polls_is_given_its_replacement(tmp_path: Path, temporal_address: str):
    script = tmp_path / "flaky.sh"
    script.write_text(FLAKY)
    mark = tmp_path / "started-once"
    cmd = f"sh {shlex.quote(str(script))} {shlex.quote(str(mark))} {WORKER_CMD}"
    out = _chaos(tmp_path / "home", temporal_address, cmd)
    assert mark.exists() and out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "verdict: PASS" in out.stdout


def test_a_command_that_dies_twice_before_it_polls_is_one_line_exit_3(tmp_path: Path, temporal_address: str):
    cmd = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(1); raise SystemExit(1)'"
    out = _chaos(tmp_path / "home", temporal_address, cmd)
    assert out.returncode == 3, out.stdout[-2000:] + out.stderr[-2000:]
    line = out.stderr.strip().splitlines()[-1]
    assert "the worker command " in line and "before it polled, on 2 starts (the first and the supervisor's" in line
