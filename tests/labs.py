"""The two workloads as the tests drive them from the command line: our own loop, and a user's workflow
(the example project's worker, examples/user_worker). Tests of chaos, --verify, status and the app
take the `lab` fixture (conftest.py) and run each case for both, the way the ledger fixture runs a case
on both backends: a capability missing for one workload fails a test."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path

from conftest import queue_of, run_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_worker" / "worker.py"
WORKER_CMD = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLE))}"
_homes = count()


@dataclass(frozen=True)
class Lab:
    kind: str  # runs.kind of its runs
    unit: str  # the word the reports use for its units

    def home(self, root: Path, name: str) -> Path:
        return root / f"{name}-{self.kind}-{next(_homes)}"

    def flags(self, home: Path, ledger: str | None = None, address: str | None = None) -> list[str]:
        """Global flags: the home, the workers, the ledger, Temporal (None: the home's own dev server)."""
        worker = ["--worker-cmd", WORKER_CMD, "--task-queue", queue_of("uw", home)] if self.kind == "workflow" else []
        where = ["--temporal-address", address] if address else []
        return ["--home", str(home), *where, *worker, *(["--ledger", ledger] if ledger else [])]

    def run_flags(self, units: int, pace: float = 0.2) -> list[str]:
        """After `start` or `chaos`: a run of `units` units."""
        if self.kind == "workflow":
            return ["--workflow", "SendLines", "--input", json.dumps({"count": units, "pace": pace})]
        return ["--steps", str(units)]

    def verify_flags(self, units: int = 8, pace: float = 0.2) -> list[str]:
        """Before --verify: which workflow (ours needs none)."""
        if self.kind == "workflow":
            return ["--workflow", "SendLines", "--input", json.dumps({"count": units, "pace": pace})]
        return []

    @property
    def bundles(self) -> bool:
        """Proof bundles replay their histories on checkpoint-tui's own workflow code: ours only."""
        return self.kind == "agent-loop"

    def stop(self, home: Path) -> None:
        """`stop` the home; a user's worker command is also proven gone (started_for: its environment)."""
        from test_user_workflow_lab import stop_lab

        if self.kind == "workflow":
            stop_lab(home)
        else:
            run_cli("--home", str(home), "stop")

    def each_effect_once(self, home: Path, run_id: str, units: int) -> None:
        """What the run did to the world, read from its own outputs: our loop's outbox (one email a
        step); the example's output file (one line per activity)."""
        if self.kind == "workflow":
            lines = (home / "example-out" / f"{run_id}.txt").read_text().splitlines()
            assert Counter(lines) == Counter(f"{run_id} line {i}" for i in range(1, units + 1))
        else:
            outbox = (home / "artifacts" / run_id / "outbox.log").read_text().splitlines()
            assert len(outbox) == units and len(set(outbox)) == units


LABS = {"agent-loop": Lab("agent-loop", "step"), "workflow": Lab("workflow", "activity")}


def tmux(sock: str, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    """tmux on a server of the test's own (-L): killing it at the end touches no one else's sessions."""
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True, check=check)


@contextlib.contextmanager
def app_in_tmux(home, ready: str = "ready — n new run", size: tuple[int, int] = (160, 45)) -> Iterator[tuple[str, int]]:
    """The real app in a real terminal (Textual's Linux driver, its input thread) on `home` (Settings):
    its tmux server name (for `tmux(name, ...)`) and pid once the screen shows `ready`; the tmux
    server is killed and the home's processes stopped afterwards, however the test ended."""
    name = f"lab-{os.getpid()}-{next(_homes)}"
    where = ["--temporal-address", home.temporal_address] if home.temporal_address else []
    flags = ["--home", str(home.home), *where]
    cmd = " ".join([sys.executable, "-m", "checkpoint_tui", *flags])
    width, height = size
    tmux(name, "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), f"exec {cmd}", check=True)
    try:
        pane = tmux(name, "display", "-p", "-t", name, "#{pane_pid}")
        deadline = time.monotonic() + 60
        while ready not in (screen := tmux(name, "capture-pane", "-p", "-t", name).stdout):
            assert time.monotonic() < deadline, f"the app never showed {ready!r}:\n{screen}"
            time.sleep(0.05)
        yield name, int(pane.stdout)
    finally:
        tmux(name, "kill-server")
        subprocess.run([sys.executable, "-m", "checkpoint_tui", *flags, "stop"], capture_output=True, timeout=60)


def start_script(argv: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> subprocess.Popen:
    """A worker script of an example started by hand (no lab): its output to `log_path`, in a session of
    its own (no terminal signal reaches it; only the test stops it, by its Popen)."""
    with open(log_path, "wb") as log:  # the child keeps its own copy
        return subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
