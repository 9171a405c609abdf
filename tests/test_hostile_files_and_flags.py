"""Hostile files, records and flags: run/ is private, the ledger 0600, nothing is opened through a
planted symlink, a forged process record gets nobody signalled, a bad flag exits 2 before anything
starts, and a damaged ledger or an unparsable URL is one line without a secret in it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.ledger.artifacts import ArtifactPathError, append_once, run_folder, write_atomic
from checkpoint_tui.ops.procs import ProcIdentity, write_json
from checkpoint_tui.settings import Settings, load_settings, postgres_label
from conftest import run_cli

BAD_FLAGS = [
    ("start", "--pace", "nan"),
    ("start", "--pace", "inf"),
    ("start", "--pace", "-1"),
    ("start", "--steps", "0"),
    ("start", "--steps", "100000000"),
    ("start", "--fault", "kill_at:100000000000000000000"),
    ("start", "--steps", "5", "--fault", "kill_at:9"),
    ("start", "--fault", "transient:2:0"),
    ("--workers", "0", "start"),
    ("--workers", "1000", "start"),
    ("--refresh", "0", "status"),
    ("chaos", "--kills", "2"),
    ("chaos", "--steps", "5", "--kills", "6"),
    ("chaos", "--steps", "100000", "--kills", "10001"),  # a schedule holds at most 10,000 events
    ("compare", "--steps", "4", "--kill-at", "4"),
    ("--model-url", "http://user:pw@127.0.0.1:9/v1", "start"),
    ("--model-url", "http://127.0.0.1:9/v1?key=abc", "start"),
    ("--model-url", "file:///etc/passwd", "start"),
    ("--ledger", "postgresql://u@h/db?port=%zz", "start"),
]


@pytest.mark.parametrize("flags", BAD_FLAGS, ids=lambda f: " ".join(f))
def test_a_bad_flag_exits_2_with_one_line_before_anything_starts(tmp_path, flags):
    out = run_cli("--home", str(tmp_path), *flags, timeout=60)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "devserver.json").exists() and not (tmp_path / "run" / "worker.json").exists()
    assert "pw@" not in out.stderr and "key=abc" not in out.stderr


def test_a_ledger_password_never_reaches_an_error(tmp_path):
    url = "postgresql://ck:s3cr3t-pw@127.0.0.1:1/ledger?password=s3cr3t-q&connect_timeout=2"
    out = run_cli("--home", str(tmp_path), "--ledger", url, "status", timeout=60)
    assert out.returncode == 3 and "Traceback" not in out.stderr, out.stderr
    assert "s3cr3t" not in out.stderr + out.stdout and "127.0.0.1:1" in out.stderr


def test_multi_host_urls_parse_and_label_every_host():
    label = postgres_label("postgresql://u:p@h1:5433,h2/db?target_session_attrs=read-write")
    assert label == "postgresql://h1:5433,h2:5432/db"
    assert postgres_label("postgresql:///db?host=/run/pg&port=6543") == "postgresql:///run/pg:6543/db"
    with pytest.raises(UsageError) as info:
        load_settings("/tmp", ledger_url="postgresql://u:s3cr3t@h/db?port=%zz")
    assert "s3cr3t" not in str(info.value)


def test_run_folder_is_private_and_the_ledger_0600(tmp_path):
    out = run_cli("--home", str(tmp_path), "status")
    assert out.returncode == 0
    settings = Settings(home=tmp_path)
    settings.ensure_dirs()
    from checkpoint_tui.ledger.store import close_all, connect

    connect(settings.ledger)
    close_all()
    assert stat.S_IMODE(settings.run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(settings.db_path.stat().st_mode) == 0o600
    os.chmod(settings.run_dir, 0o777)
    out = run_cli("--home", str(tmp_path), "start", "--steps", "1", timeout=60)
    assert out.returncode == 2 and "writable by group or others" in out.stderr
    assert not (settings.run_dir / "devserver.json").exists()


def test_a_damaged_ledger_is_one_line(tmp_path):
    (tmp_path / "run").mkdir(mode=0o700)
    (tmp_path / "run" / "checkpoint.db").write_bytes(b"this is not a database file" * 100)
    out = run_cli("--home", str(tmp_path), "status", timeout=60)
    assert out.returncode == 3 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "damaged or not a checkpoint-tui ledger" in out.stderr and "Traceback" not in out.stderr


def test_nothing_is_written_through_a_planted_symlink(tmp_path):
    root = tmp_path / "artifacts"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (root / "run-20260101-000000-beef").mkdir(parents=True)
    outbox = root / "run-20260101-000000-beef" / "outbox.log"
    outbox.symlink_to(victim)
    with pytest.raises(OSError):
        append_once(outbox, b"x", b"x\tline\n", check=True)
    os.symlink(tmp_path, root / "run-20260101-000000-f00d")  # a run folder that is a link out of the root
    with pytest.raises(ArtifactPathError):
        write_atomic(root / "run-20260101-000000-f00d" / "step-001.md", b"data")
    for bad in ("/abs", "..", "a/b", ""):
        with pytest.raises(ArtifactPathError):
            run_folder(root, bad)
    assert victim.read_text() == "precious"

    settings = Settings(home=tmp_path / "home")
    settings.ensure_dirs()
    (settings.run_dir / "devserver.lock").symlink_to(victim)  # the lock must not truncate its target
    from checkpoint_tui.ops.devserver import recorded

    assert recorded(settings) == (None, None)
    with pytest.raises(OSError):
        from checkpoint_tui.ops.procs import open_lock

        open_lock(settings.run_dir / "devserver.lock")
    assert victim.read_text() == "precious"


def test_forged_records_get_nobody_signalled(tmp_path):
    """Records naming a live process of this user that is not this home's worker or dev server, with
    its true pid, create time and command line: `stop` must spare it."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ident = None
        deadline = time.monotonic() + 5
        while ident is None or sys.executable not in ident.cmdline:
            assert time.monotonic() < deadline
            ident = ProcIdentity.of(sleeper.pid)
        settings = Settings(home=tmp_path)
        settings.ensure_dirs()
        record = {"identity": ident.to_dict(), "name": "w-forged", "role": "active", "slot": 0}
        write_json(settings.run_dir / "worker.json", record)
        write_json(settings.run_dir / "spare.json", {**record, "role": "spare"})
        write_json(settings.run_dir / "devserver.json", {"identity": ident.to_dict(), "address": "127.0.0.1:1"})
        write_json(settings.run_dir / "modelserver.json", {"identity": ident.to_dict(), "url": "http://x"})
        (settings.run_dir / "worker-1.json").write_text(json.dumps({"identity": "garbage"}))
        out = run_cli("--home", str(tmp_path), "stop", timeout=60)
        assert out.returncode == 0, out.stderr
        assert "nothing of this home was running" in out.stdout
        assert sleeper.poll() is None, "a forged record got a foreign process signalled"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_model_url_with_credentials_is_refused_by_settings():
    with pytest.raises(UsageError, match="CHECKPOINT_API_KEY"):
        load_settings(Path("/tmp"), model_url="https://me:secret@api.example.invalid/v1")


# Schedule events that got past the file's checks and started the lab (a bool is a Python int), crashed
# it (an unhashable nemesis), or named a report file no file system takes (a 4000-digit seed).
HOSTILE_SCHEDULES = {
    "at_step true": {"steps": 12, "events": [{"at_step": True, "nemesis": "activity-reset"}]},
    "delay_ms true": {"steps": 12, "events": [{"at_step": 4, "nemesis": "activity-reset", "delay_ms": True}]},
    "duration_s true": {"steps": 12, "events": [{"at_step": 4, "nemesis": "activity-pause", "duration_s": True}]},
    "nemesis a list": {"steps": 12, "events": [{"at_step": 4, "nemesis": ["reset"]}]},
    "huge seed": '{"steps": 12, "seed": ' + "9" * 4000 + ', "events": [{"at_step": 4, "nemesis": "reset"}]}',
    "10,001 events": {"steps": 100_000, "events": [{"at_step": k, "nemesis": "reset"} for k in range(2, 10_003)]},
}


@pytest.mark.parametrize("name", HOSTILE_SCHEDULES)
def test_a_hostile_schedule_event_is_exit_2_before_anything_starts(tmp_path, name):
    path, doc = tmp_path / "s.json", HOSTILE_SCHEDULES[name]
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    user = ["--worker-cmd", f"{sys.executable} -c pass", "chaos", "--workflow", "SendLines"]
    for argv in (["chaos", "--schedule", str(path)], [*user, "--schedule", str(path)]):
        home = tmp_path / f"h{len(argv)}"
        out = run_cli("--home", str(home), *argv, timeout=60)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (argv, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr and str(path) in out.stderr and len(out.stderr) < 500, out.stderr
        assert not (home / "run").exists(), sorted(p.name for p in (home / "run").iterdir())  # nothing started


def test_absurd_counts_on_a_users_workflow_are_exit_2_before_anything_starts(tmp_path):
    """Its seeded schedule spans the events it holds: without a bound, 200,000 of them started the lab."""
    user = ["--worker-cmd", f"{sys.executable} -c pass", "chaos", "--workflow", "SendLines"]
    for extra in (["--kills", "100000", "--resets", "100000"], ["--kills", "9000", "--activity-pauses", "1001"]):
        out = run_cli("--home", str(tmp_path), *user, *extra, timeout=60)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "a schedule holds at most 10000" in out.stderr and "Traceback" not in out.stderr
        assert not (tmp_path / "run").exists()


def test_save_schedule_refuses_what_running_would(tmp_path):
    """Writing the seeded schedule takes the same flags as running it: a pairing the run refuses, or more
    events than a schedule holds, is exit 2 and no file, on our loop as on a user's workflow."""
    saved = tmp_path / "s.json"
    user = ["--worker-cmd", f"{sys.executable} -c pass", "chaos", "--workflow", "SendLines"]
    for argv in (
        ["chaos", "--max-kills", "5"],
        ["chaos", "--until-covered", "--runs", "2"],
        ["chaos", "--steps", "100000", "--kills", "3", "--resets", "99995"],
        [*user, "--max-kills", "5"],
        [*user, "--kills", "9000", "--resets", "1001"],
    ):
        out = run_cli("--home", str(tmp_path / "h"), *argv, "--save-schedule", str(saved), timeout=60)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, (argv, out.stdout, out.stderr)
        assert not saved.exists() and not (tmp_path / "h" / "run").exists(), argv


def test_two_writers_of_one_record_never_share_a_temp_file_nor_write_through_a_link(tmp_path):
    """A chaos command and its supervisor both save the active worker (run/worker.pid): with one fixed
    temp name, one's rename found the file the other had renamed (FileNotFoundError, a traceback). A
    link planted at the record is replaced, the file it names untouched."""
    import threading

    from checkpoint_tui.ops.procs import write_text

    record, errors = tmp_path / "run" / "worker.pid", []

    def writer(pid: int) -> None:
        try:
            for _ in range(300):
                write_text(record, f"{pid}\n")
        except OSError as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(pid,)) for pid in (41, 42)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and record.read_text() in ("41\n", "42\n")
    assert [p.name for p in record.parent.iterdir()] == ["worker.pid"]  # no temp file left
    target = tmp_path / "elsewhere"
    target.write_text("theirs")
    record.unlink()
    record.symlink_to(target)
    write_text(record, "43\n")
    assert target.read_text() == "theirs" and not record.is_symlink() and record.read_text() == "43\n"
