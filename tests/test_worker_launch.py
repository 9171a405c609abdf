"""One spawn path for both kinds of worker: what differs (argv, environment, cwd, Temporal identity,
exec recognition, error text, group signalling) comes from the launch chosen from the settings, and
worker_proc.spawn does the rest for either."""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops import user_worker, worker_proc
from checkpoint_tui.ops.launch import WORKER_MODULE, Launch
from checkpoint_tui.ops.procs import ProcIdentity
from checkpoint_tui.settings import PROBE_LOG_ENV, PROBE_LOG_NAME, Settings
from checkpoint_tui.waiting import wait_until_sync

SLEEPS = (sys.executable, "-c", "import time; time.sleep(60)")


def lab(tmp_path: Path, **kwargs) -> Settings:
    return replace(Settings(home=tmp_path / "home", temporal_address="127.0.0.1:9"), **kwargs)


def test_our_worker_is_named_on_its_command_line_and_a_spare_waits(tmp_path: Path):
    settings = lab(tmp_path)
    launch = worker_proc.launch_for(settings, "127.0.0.1:9", "spare", ("--fail-after", "3"))
    argv = list(launch.argv)
    assert argv[:3] == [sys.executable, "-m", WORKER_MODULE]
    assert argv[argv.index("--home") + 1] == str(settings.home)
    assert argv[-3:] == ["--fail-after", "3", "--standby"]
    name = argv[argv.index("--identity") + 1]
    assert name.startswith("w-") and launch.name_for(12345) == name
    assert launch.env["CHECKPOINT_HOME"] == str(settings.home) and launch.cwd == settings.home
    assert (launch.role, launch.user_cmd, launch.what) == ("spare", False, "the worker")
    assert "--standby" not in worker_proc.launch_for(settings, "127.0.0.1:9").argv


def test_a_users_command_keeps_its_argv_and_gets_the_sdk_environment(tmp_path: Path):
    settings = lab(tmp_path, worker_cmd=SLEEPS, worker_cwd=tmp_path)
    launch = worker_proc.launch_for(settings, "127.0.0.1:7233", "spare", ("--ignored",))
    assert launch.argv == SLEEPS and launch.cwd == tmp_path
    assert launch.env["TEMPORAL_ADDRESS"] == "127.0.0.1:7233"
    assert launch.env["CHECKPOINT_HOME"] == str(settings.home)
    assert launch.env[PROBE_LOG_ENV] == str(settings.run_dir / PROBE_LOG_NAME)
    assert settings.probe_log == settings.run_dir / PROBE_LOG_NAME
    assert launch.name_for(4242) == f"4242@{socket.gethostname()}"
    # no standby protocol: asked for a spare, it is still an active worker
    assert (launch.role, launch.user_cmd, launch.what) == ("active", True, "the worker command")


def test_a_users_command_is_spawned_recorded_and_loaded_back(tmp_path: Path):
    settings = lab(tmp_path, worker_cmd=SLEEPS)
    worker = worker_proc.spawn(settings, "127.0.0.1:9")
    try:
        assert worker.user_cmd and worker.name == user_worker.default_identity(worker.pid)
        record = json.loads((settings.run_dir / "worker.json").read_text())
        assert record["user_cmd"] is True and record["name"] == worker.name
        loaded = worker_proc.load(settings)
        assert loaded is not None and loaded.user_cmd and loaded.pid == worker.pid
    finally:
        worker_proc.stop(settings, worker)
    assert wait_until_sync(lambda: not worker.alive(), 5)


def test_a_startup_death_names_the_kind_of_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    settings = lab(tmp_path, worker_cmd=(sys.executable, "-c", "print('no task queue given'); raise SystemExit(3)"))
    real = user_worker.user_command

    def dies_before_seen(pid: int, argv: list[str]) -> ProcIdentity | None:
        return None  # as if it exited before it was seen to exec (its status is still read)

    def launch(settings: Settings, address: str, member: object = None) -> Launch:
        return replace(real(settings, address), execd=dies_before_seen)

    monkeypatch.setattr(worker_proc, "user_command", launch)
    with pytest.raises(Unavailable) as err:
        worker_proc.spawn(settings, "127.0.0.1:9")
    message = str(err.value)
    assert message.startswith("the worker command exited with code 3 at once"), message
    assert "no task queue given" in message
    assert worker_proc.load(settings) is None
