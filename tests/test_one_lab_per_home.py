"""One lab per home (ops/lab_lock.py): an experiment (chaos, --verify, doctor) holds its home alone,
the app and `start` share it; whatever is refused is refused before it starts anything, in one line
naming the holder, exit 2. `stop` ends an experiment in progress instead of leaving it to run on
against a stopped lab."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.ops import lab_lock, worker_proc
from checkpoint_tui.settings import Settings
from conftest import run_cli
from labs import app_in_tmux
from test_user_workflow_lab import started_for, stop_lab


def until(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_an_experiment_holds_a_home_alone_and_sharers_share(tmp_path):
    home = Settings(home=tmp_path / "h")
    with lab_lock.hold(home, "the app", exclusive=False):
        assert [cmd for _, cmd, _ in lab_lock.holders(home)] == ["the app"]
        with lab_lock.hold(Settings(home=home.home), "start", exclusive=False):  # sharers share
            pass
        with pytest.raises(UsageError) as refused, lab_lock.hold(home, "chaos", exclusive=True):
            pass
    said = str(refused.value)
    assert f"in use by the app (pid {os.getpid()})" in said and "\n" not in said, said
    assert f"--home {home.home} stop" in said
    with (
        lab_lock.hold(home, "chaos", exclusive=True),  # free again once the sharers left
        pytest.raises(UsageError, match=r"in use by chaos \(pid"),
        lab_lock.hold(home, "the app", exclusive=False),
    ):
        pass
    assert lab_lock.holders(home) == []  # records go with their holders


def test_a_stale_or_forged_holder_record_names_nothing(tmp_path):
    home = Settings(home=tmp_path / "h")
    home.ensure_dirs()
    (home.run_dir / "lab").mkdir()
    (home.run_dir / "lab" / "1.json").write_text('{"identity": {"pid": 1, "create_time": 0, "cmdline": []}}')
    (home.run_dir / "lab" / "2.json").write_text("not json")
    assert lab_lock.holders(home) == []
    with lab_lock.hold(home, "chaos", exclusive=True):
        assert [cmd for _, cmd, _ in lab_lock.holders(home)] == ["chaos"]
        left = sorted(p.name for p in (home.run_dir / "lab").iterdir())
        assert len(left) == 1 and left[0].startswith(f"{os.getpid()}-"), left  # the stale ones swept


def test_a_second_chaos_is_refused_naming_the_first_and_stop_ends_the_first(tmp_path):
    """The second chaos leaves the first's supervisor recorded (it used to delete its record, so
    `stop` missed it and it respawned the lab); `stop` then ends the first chaos itself, which says
    so and exits 1, and nothing of the home is left."""
    home = tmp_path / "h"
    left = run_cli("--home", str(home), "start", "--steps", "1", "--pace", "0", timeout=90)  # a lab left running
    assert left.returncode == 0, left.stderr
    argv = [
        sys.executable,
        "-m",
        "checkpoint_tui",
        "--home",
        str(home),
        "chaos",
        "--seed",
        "1",
        "--steps",
        "60",
        "--kills",
        "3",
    ]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        record = home / "run" / "chaos-supervisor.json"
        until(lambda: record.exists() and any((home / "run" / "lab").glob(f"{first.pid}-*.json")), 90, "first chaos")
        second = run_cli("--home", str(home), "chaos", "--seed", "2", "--steps", "10", "--kills", "3", timeout=60)
        assert second.returncode == 2, second.stdout + second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"in use by chaos (pid {first.pid})" in lines[0], second.stderr
        assert "Traceback" not in second.stderr and record.exists() and first.poll() is None
        stopped = run_cli("--home", str(home), "stop", timeout=90)
        assert f"chaos {first.pid}" in stopped.stdout, stopped.stdout + stopped.stderr
        out, err = first.communicate(timeout=60)
        assert first.returncode == 1 and "chaos: stopped by SIGTERM" in err, err[-2000:]
        assert "chaos: this home's lab is running (dev server" in out, out[:2000]  # taken over, and said
        assert "Traceback" not in err
        until(lambda: not started_for(home), 15, "the home's processes to end")
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        stop_lab(home)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_chaos_and_verify_beside_the_app_are_refused_and_the_apps_workers_untouched(home: Settings):
    with app_in_tmux(home) as (_, pane_pid):
        until(lambda: worker_proc.load_all(home), 60, "the app's worker")
        before = {(w.pid, w.role) for w in worker_proc.load_all(home)}
        app_pid = next(h.pid for h, _, _ in lab_lock.holders(home))
        assert app_pid == pane_pid  # the holder named is the app itself
        chaos = ["--home", str(home.home), "chaos", "--seed", "1", "--steps", "10", "--kills", "3"]  # embedded
        for argv in (chaos, ["--home", str(home.home), "--temporal-address", home.temporal_address, "--verify"]):
            refused = run_cli(*argv, timeout=60)
            assert refused.returncode == 2, refused.stdout + refused.stderr
            lines = refused.stderr.strip().splitlines()
            assert len(lines) == 1 and f"in use by the app (pid {app_pid})" in lines[0], refused.stderr
        after = {(w.pid, w.role) for w in worker_proc.load_all(home)}
        assert after == before and all(psutil.pid_exists(pid) for pid, _ in after)


def test_the_app_and_start_are_refused_while_an_experiment_holds_the_home(tmp_path: Path):
    home = Settings(home=tmp_path / "h")
    with lab_lock.hold(home, "--verify", exclusive=True):
        out = run_cli("--home", str(home.home), "start", "--steps", "2", timeout=60)
    assert out.returncode == 2 and f"in use by --verify (pid {os.getpid()})" in out.stderr, out.stderr
    assert not worker_proc.load_all(home)  # refused before it started anything


def test_stop_during_verify_ends_it_and_its_verify_home(home: Settings):
    """#39: `stop` stopped the dev server under --verify but not the verify home's workers, and --verify
    went on 150-190 s into a dozen RPCError FAIL lines without saying the home was stopped."""
    argv = [
        sys.executable,
        "-m",
        "checkpoint_tui",
        "--home",
        str(home.home),
        "--temporal-address",
        home.temporal_address,
        "--verify",
    ]
    verify = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    vhome = home.home / "run" / "verify"
    try:
        until(lambda: worker_proc.load_all(Settings(home=vhome)), 90, "--verify's first worker")
        stopped = run_cli("--home", str(home.home), "stop", timeout=90)
        assert f"--verify {verify.pid}" in stopped.stdout, stopped.stdout + stopped.stderr
        _, err = verify.communicate(timeout=60)
        assert verify.returncode == 1 and "--verify: stopped by SIGTERM" in err and "Traceback" not in err, err
        until(lambda: not worker_proc.load_all(Settings(home=vhome)), 15, "the verify home's workers to end")
    finally:
        if verify.poll() is None:
            verify.kill()
            verify.wait()
        stop_lab(vhome)
        stop_lab(home.home)
