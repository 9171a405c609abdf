"""run/worker.log and the dev server's run/temporal.log are capped and rotated (issue 25, finding 11):
a child writes into a pipe and a small writer process keeps the log under LOG_CAP, renaming it to
NAME.1 past that (at most two files), so a chatty worker command cannot fill the disk; a child that
dies at start still has its last line read from the log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops import devserver, logcap
from checkpoint_tui.settings import Settings

CAP = 256 * 1024
CHATTY = "import sys\nfor i in range(40000): sys.stdout.write(f'line {i:06d} ' + 'x' * 88 + '\\n')\nprint('last words')"


def test_a_chatty_child_keeps_its_log_under_two_caps(tmp_path: Path):
    log = logcap.open_log(tmp_path, "worker.log", cap=CAP)
    try:
        child = subprocess.Popen([sys.executable, "-c", CHATTY], stdout=log.fd, stderr=log.fd)
    finally:
        log.close()
    assert child.wait(30) == 0 and log.drained(10)
    current, rotated = tmp_path / "worker.log", tmp_path / "worker.log.1"
    assert current.stat().st_size <= CAP and rotated.stat().st_size <= CAP  # 4 MB written, 2 x 256 KiB kept
    assert current.read_text().rstrip().endswith("last words")  # the newest lines are the ones kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker.log", "worker.log.1"]


def test_a_link_planted_at_the_log_is_not_followed(tmp_path: Path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    run = tmp_path / "run"
    run.mkdir()
    (run / "worker.log").symlink_to(victim)
    log = logcap.open_log(run, "worker.log", cap=CAP)
    try:
        child = subprocess.Popen([sys.executable, "-c", "print('hello')"], stdout=log.fd, stderr=log.fd)
    finally:
        log.close()
    assert child.wait(30) == 0 and log.drained(10)  # the child ran; its output was dropped
    assert victim.read_text() == "precious"


def test_the_dev_server_log_is_capped_and_its_last_line_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A `temporal` that floods its log and dies: the log stays under its cap, and the start-up error
    quotes the last line (it may still be in the pipe when the death is seen)."""
    fake = tmp_path / "temporal"
    fake.write_text(f"#!{sys.executable}\n{CHATTY}\nraise SystemExit(3)\n")
    fake.chmod(0o755)
    monkeypatch.setattr(logcap, "LOG_CAP", CAP)
    settings = Settings(home=tmp_path / "home", temporal_bin=str(fake))
    with pytest.raises(Unavailable, match="exited with code 3.*last words"):
        devserver.ensure_devserver(settings, timeout=30)
    sizes = {p.name: p.stat().st_size for p in settings.run_dir.glob("temporal.log*")}
    assert set(sizes) == {"temporal.log", "temporal.log.1"} and max(sizes.values()) <= CAP, sizes


def test_a_chatty_worker_command_spawned_by_the_lab_keeps_run_worker_log_capped(tmp_path: Path, monkeypatch):
    """The lab's own spawn of a worker command (not just the writer): 4 MB of output, two capped files."""
    from dataclasses import replace

    from checkpoint_tui.ops import worker_proc
    from checkpoint_tui.waiting import wait_until_sync

    monkeypatch.setattr(logcap, "LOG_CAP", CAP)
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY + "\nimport time; time.sleep(0.5)\n")  # alive long enough to be seen exec'd
    settings = replace(
        Settings(home=tmp_path / "home", temporal_address="127.0.0.1:9"), worker_cmd=(sys.executable, str(script))
    )
    worker = worker_proc.spawn(settings, "127.0.0.1:9")
    try:
        log = settings.run_dir / "worker.log"
        assert wait_until_sync(lambda: not worker.alive() and log.read_text().rstrip().endswith("last words"), 30)
    finally:
        worker_proc.stop(settings, worker)
    sizes = {p.name: p.stat().st_size for p in settings.run_dir.glob("worker.log*")}
    assert set(sizes) == {"worker.log", "worker.log.1"} and max(sizes.values()) <= CAP, sizes


def test_every_child_log_under_run_goes_through_the_cap():
    """No module opens a log under run/ itself: each child's output goes through ops/logcap.py."""
    import re
    from pathlib import Path

    import checkpoint_tui

    opened_here = re.compile(r"""(?<![\w.])open\([^)]*(\.log["']|["']a)""")  # a log's name, or appending
    package = Path(checkpoint_tui.__file__).parent
    found = [
        f"{p.relative_to(package)}: {line.strip()}"
        for p in package.rglob("*.py")
        for line in p.read_text().splitlines()
        if opened_here.search(line)
    ]
    assert not found, found
