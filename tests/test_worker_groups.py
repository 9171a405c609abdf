"""A user's worker command that forks its real worker and exits: `stop` still stops the grandchild
(it is in the command's process group, with this home's CHECKPOINT_HOME), by its own identity; a
process of the same group started for another home, or one outside the group, is spared (issue 25,
finding 8)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import psutil

from checkpoint_tui.ops import worker_groups, worker_proc
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until_sync
from conftest import run_cli

# The leader forks a long-lived child into its own group, writes the child's pid, lives a moment (so
# the lab sees it exec), then exits.
FORKS_AND_EXITS = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(1.0)
"""


def child_pid(pid_file: Path) -> int:
    assert wait_until_sync(lambda: pid_file.exists() and pid_file.read_text().strip(), 10)
    return int(pid_file.read_text())


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_stop_stops_a_grandchild_whose_leader_exited(tmp_path: Path):
    script, pid_file = tmp_path / "worker.py", tmp_path / "child.pid"
    script.write_text(FORKS_AND_EXITS)
    home = Settings(home=tmp_path / "home", temporal_address="127.0.0.1:9")
    settings = replace(home, worker_cmd=(sys.executable, str(script), str(pid_file)))
    child = None
    try:
        leader = worker_proc.spawn(settings, "127.0.0.1:9")
        child = child_pid(pid_file)
        assert wait_until_sync(lambda: not leader.alive(), 10)  # the command itself has exited
        assert worker_proc.load(settings, "active") is None  # its record names nobody alive any more
        assert not _gone(child)
        started = time.monotonic()
        out = run_cli("--home", str(home.home), "--temporal-address", "127.0.0.1:9", "stop")
        assert out.returncode == 0, out.stderr
        assert f"leftover worker {leader.pid}" in out.stdout, out.stdout
        assert wait_until_sync(lambda: _gone(child), 5), "the grandchild outlived stop"
        print(f"\nstop ended the orphaned grandchild in {time.monotonic() - started:.2f} s")
        assert worker_groups.leftover_groups(settings) == [] and not list(home.run_dir.glob("group-*.json"))
        again = run_cli("--home", str(home.home), "--temporal-address", "127.0.0.1:9", "stop")
        assert "nothing of this home was running" in again.stdout
    finally:
        if child is not None and not _gone(child):
            os.kill(child, 9)  # our own test's grandchild, known by the pid it wrote


def test_a_member_of_another_home_is_not_stopped(tmp_path: Path):
    """A forged group record naming a live process of another home's group gets nobody signalled."""
    script, pid_file = tmp_path / "worker.py", tmp_path / "child.pid"
    script.write_text(FORKS_AND_EXITS)
    other = Settings(home=tmp_path / "other", temporal_address="127.0.0.1:9")
    theirs = replace(other, worker_cmd=(sys.executable, str(script), str(pid_file)))
    mine = Settings(home=tmp_path / "mine", temporal_address="127.0.0.1:9")
    mine.ensure_dirs()
    child = None
    leader = worker_proc.spawn(theirs, "127.0.0.1:9")
    try:
        child = child_pid(pid_file)
        worker_groups.record_group(mine, leader.ident)  # the other home's group, recorded in mine
        assert worker_groups.leftover_groups(mine) == []
        assert worker_groups.stop_group(mine, leader.ident) == []
        assert not _gone(child)
    finally:
        worker_proc.stop(theirs, leader)
        if child is not None:
            assert wait_until_sync(lambda: _gone(child), 5)
