"""The CLI as a user meets it: subprocesses of `python -m checkpoint_tui`."""

from __future__ import annotations

import argparse
import json

import psutil

from checkpoint_tui.cli.parser import build_parser, has_default
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.procs import free_port, read_json
from checkpoint_tui.settings import Settings
from conftest import run_cli

STATUS_KEYS = {
    "run_id",
    "workflow_status",
    "completed_steps",
    "total_steps",
    "ledger_rows",
    "duplicates",
    "outbox_lines",
    "notes_rows",
    "artifact_files",
    "worker_pids",
}


def test_help_works():
    out = run_cli("--help")
    assert out.returncode == 0
    for word in ("start", "status", "stop", "--verify", "--home", "--temporal-address"):
        assert word in out.stdout


def test_bad_flag_is_one_line_exit_2():
    out = run_cli("--bogus")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "--bogus" in out.stderr


def test_a_mistyped_command_gets_the_nearest_one(tmp_path):
    """`chaso` is one line on stderr naming `chaos`, exit 2; with global flags before it, too."""
    for argv in (["chaso"], ["--home", str(tmp_path), "stauts", "--json"]):
        out = run_cli(*argv)
        assert out.returncode == 2, out
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "did you mean 'chaos'?" in run_cli("chaso").stderr
    assert "did you mean 'status'?" in out.stderr
    far = run_cli("xyzzy")  # nothing near: the commands there are, still one line
    assert far.returncode == 2 and "did you mean" not in far.stderr and "chaos" in far.stderr
    assert len(far.stderr.strip().splitlines()) == 1


def _every_parser() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **subs.choices}


def test_every_flag_has_help_and_shows_its_default():
    """Every option of every command says what it is, and `--help` shows its default where it has one
    (in the parser's "(default: ...)" or in the help's own words, e.g. "default: cwd")."""
    for name, parser in _every_parser().items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
                continue
            where = f"checkpoint-tui {name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help and action.help.strip(), f"{where}: no help"
            text = formatter._expand_help(action)
            if has_default(action) and action.option_strings:
                value = action.default
                said = {str(value), f"{value:g}"} if isinstance(value, float) else {str(value)}
                assert "default" in text and any(s in text for s in said), f"{where}: {text!r} hides {value!r}"


def test_chaos_help_explains_seed_and_kills():
    out = run_cli("chaos", "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    assert "--seed SEED seed of the schedule" in text and "(default: 1)" in text
    assert "--kills KILLS SIGKILLs in the schedule" in text and "(default: 8)" in text
    assert "--pauses PAUSES also SIGSTOP" in text and "(default: 0)" in text


def test_bad_fault_spec_is_usage_error(tmp_path):
    out = run_cli("--home", str(tmp_path), "start", "--fault", "explode:3")
    assert out.returncode == 2
    assert "bad fault" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_missing_temporal_binary_is_actionable(tmp_path):
    out = run_cli(
        "--home", str(tmp_path), "start", "--steps", "1", env={"CHECKPOINT_TEMPORAL_BIN": "/nonexistent/temporal"}
    )
    assert out.returncode == 3
    assert "temporal binary not found" in out.stderr and "make run" in out.stderr
    assert "Traceback" not in out.stderr


def test_unreachable_external_address_is_actionable(tmp_path):
    port = free_port()  # nothing listens there
    out = run_cli("--home", str(tmp_path), "--temporal-address", f"127.0.0.1:{port}", "start", "--steps", "1")
    assert out.returncode == 3
    assert f"cannot reach Temporal at 127.0.0.1:{port}" in out.stderr and "--temporal-address" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "devserver.json").exists()  # external: it started nothing


def test_status_without_runs(tmp_path):
    """No runs yet is not "unavailable": exit 0, one line, and nothing created in the home."""
    out = run_cli("--home", str(tmp_path), "status")
    assert out.returncode == 0 and "no runs yet" in out.stdout, out.stderr
    out = run_cli("--home", str(tmp_path), "status", "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == {"run_id": None}
    assert list(tmp_path.iterdir()) == []  # status never creates a ledger
    out = run_cli("--home", str(tmp_path), "status", "run-nope")
    assert out.returncode == 2 and "no run 'run-nope'" in out.stderr


def test_embedded_start_wait_status_stop(session_root):
    """A home with no address: start finds no server, starts one, runs, and `stop` stops what it started."""
    home = Settings(home=session_root / "embedded-home")
    out = run_cli("start", "--steps", "3", "--pace", "0", "--wait", home=home)
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.strip()
    rec = read_json(home.run_dir / "devserver.json")
    assert rec is not None and (home.run_dir / "temporal.db").exists()

    status = run_cli("status", "--json", home=home)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert set(data) >= STATUS_KEYS
    assert data["run_id"] == run_id and data["workflow_status"] == "COMPLETED"
    assert (data["completed_steps"], data["ledger_rows"], data["duplicates"], data["outbox_lines"]) == (3, 9, 0, 3)

    # A second start adopts the same dev server and worker instead of starting new ones.
    worker_pid = int((home.run_dir / "worker.pid").read_text())
    again = run_cli("start", "--steps", "1", "--pace", "0", "--wait", home=home)
    assert again.returncode == 0, again.stderr
    assert read_json(home.run_dir / "devserver.json")["identity"]["pid"] == rec["identity"]["pid"]
    assert int((home.run_dir / "worker.pid").read_text()) == worker_pid

    stop = run_cli("stop", home=home)
    assert stop.returncode == 0 and "dev server" in stop.stdout
    assert not psutil.pid_exists(rec["identity"]["pid"]) or psutil.Process(rec["identity"]["pid"]).status() == "zombie"
    assert not psutil.pid_exists(worker_pid) or psutil.Process(worker_pid).status() == "zombie"


def test_ledger_flag_rejects_non_postgres_urls(tmp_path):
    out = run_cli("--home", str(tmp_path), "--ledger", "mysql://u:pw@host/db", "status")
    assert out.returncode == 2 and "postgresql://" in out.stderr and "pw" not in out.stderr


def test_shared_ledger_run_keeps_the_password_out(session_root, temporal_address, pg_server):
    """start/status/stop on a PostgreSQL ledger; the URL's password reaches no output, record or log."""
    secret = "pw-must-not-leak"
    url = pg_server.new_database().replace("checkpoint@", f"checkpoint:{secret}@")
    home = Settings(home=session_root / "pg-cli-home", temporal_address=temporal_address)
    env = {"CHECKPOINT_LEDGER_URL": url}
    try:
        out = run_cli("--workers", "2", "start", "--steps", "3", "--pace", "0", "--wait", home=home, env=env)
        assert out.returncode == 0, out.stderr
        status = run_cli("status", "--json", home=home, env=env)
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert (data["completed_steps"], data["duplicates"], data["outbox_lines"]) == (3, 0, 3)
        assert not (home.run_dir / "checkpoint.db").exists()  # the ledger is PostgreSQL, not SQLite
        records = [p.read_text() for p in home.run_dir.glob("*.json")] + [(home.run_dir / "worker.log").read_text()]
        assert len(list(home.run_dir.glob("worker*.json"))) == 2  # --workers 2
        for text in [out.stdout, out.stderr, status.stdout, status.stderr, *records]:
            assert secret not in text
    finally:
        stop = run_cli("stop", home=home, env=env)
    assert stop.returncode == 0 and stop.stdout.count("active worker") == 2


def test_start_runs_n_at_once_and_waits_for_every_one(session_root, temporal_address):
    """`start --runs 4 --wait`: four run ids, one line each; all four run at once on one worker and
    complete; one end line per run with its duplicates; exit 0 only because every one COMPLETED."""
    home = Settings(home=session_root / "many-runs", temporal_address=temporal_address)
    try:
        out = run_cli("start", "--runs", "4", "--steps", "3", "--pace", "0", "--wait", home=home, timeout=180)
        run_ids = out.stdout.split()
        statuses = [json.loads(run_cli("status", r, "--json", home=home).stdout) for r in run_ids]
    finally:
        run_cli("stop", home=home)
    assert out.returncode == 0, out.stderr
    assert len(run_ids) == 4 == len(set(run_ids))
    assert "4/4 runs COMPLETED" in out.stderr
    assert sum(f"{r}: COMPLETED · 9 ledger rows · duplicates 0" in out.stderr for r in run_ids) == 4, out.stderr
    for s in statuses:
        assert (s["workflow_status"], s["completed_steps"], s["duplicates"]) == ("COMPLETED", 3, 0)
        assert s["outbox_lines"] == 3
    rows = [queries.run(connect(home.ledger), r) for r in run_ids]
    assert max(r.created_at for r in rows) < min(r.ended_at for r in rows)  # all four were live at once
