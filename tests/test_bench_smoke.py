"""The benchmark scripts still run (tiny sizes, against the session's dev server). Not measurements."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_tui.ledger.backend import redact_url

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(script: str, *args: str, out: Path, address: str) -> dict:
    env = {**os.environ, "CHECKPOINT_BENCH_DIR": str(out)}
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--temporal-address", address, *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((out / f"{Path(script).stem}.json").read_text())


@pytest.mark.parametrize(
    "script,args",
    [
        ("step_overhead.py", ["--steps", "4", "--repeats", "1"]),
        ("throughput.py", ["--runs", "2", "--steps", "2", "--repeats", "1"]),
        ("resume_latency.py", ["--steps", "6", "--kills", "2", "--modes", "spare"]),
        (
            "tui_tick.py",
            [
                "--steps",
                "8",
                "--phase-steps",
                "3",
                "--repeats",
                "1",
                "--idle-steps",
                "3",
                "--idle-seconds",
                "1",
                "--pace",
                "0.1",
                "--no-stock",  # the tricks' path only: every configuration is two more app launches
            ],
        ),
    ],
)
def test_bench_script_runs(script, args, tmp_path, temporal_address):
    result = run_bench(script, *args, out=tmp_path, address=temporal_address)
    assert result["machine"]["cores"] >= 1
    if script == "resume_latency.py":
        assert [r["mode"] for r in result["results"]] == ["spare"]
        assert all(r["status"] == "COMPLETED" and r["kills"] == 2 for r in result["results"])
    elif script == "throughput.py":  # both loops ran both runs; every activity's schedule-to-start read
        assert result["runs"] == 2 and result["ours_steps_per_s"] > 0 and result["bare_steps_per_s"] > 0
        assert result["ratio"] > 0 and all(v["n"] >= 8 for v in result["schedule_to_start_s"].values())
        assert all(side["worker"] > 0 for side in result["cpu_ms_per_step"].values())  # where the CPU went
        led = result["ledger_ms_per_step"]
        assert led["cpu"] > 0 and 0 < result["ledger_share"] < 1 and led["postgresql_cpu"] is None  # SQLite's
    elif script == "step_overhead.py":
        assert set(result["median_steps_per_s"]) == {"bare", "agent", "agent_local_bookkeeping"}
    else:  # the app ran in tmux and reported its refreshes, and idle
        live = result["repeats"][0]
        # a tiny run: on a loaded machine the app may boot after the early phase's three steps are over
        # (the bench reports that phase as empty); the late phase always has the app on screen
        assert live["late"]["ticks"] >= 1 and live["late"]["sql_per_tick"] >= 1, live
        assert result["idle"]["cpu_pct"] >= 0 and result["idle"]["seconds"] >= 1


def test_ledger_ops_bench_runs_on_both_backends(tmp_path, pg_url):
    env = {**os.environ, "CHECKPOINT_BENCH_DIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, str(BENCH / "ledger_ops.py"), "--steps", "3", "--repeats", "1", "--ledger", pg_url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads((tmp_path / "ledger_ops.json").read_text())
    assert set(result["median_ms_per_step"]) == {"sqlite", "postgresql"}
    assert all(v > 0 for v in result["median_ms_per_step"].values())


def test_payload_decode_and_pg_statement_benches_run(tmp_path, pg_url):
    env = {**os.environ, "CHECKPOINT_BENCH_DIR": str(tmp_path)}
    for script, args in (
        ("payload_decode.py", ["--decodes", "20", "--repeats", "1"]),
        ("pg_statement.py", [pg_url, "--statements", "8", "--repeats", "1"]),
    ):
        proc = subprocess.run(
            [sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=120, env=env
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    decodes = json.loads((tmp_path / "payload_decode.json").read_text())["us_per_decode"]
    assert set(decodes) == {"LlmInput", "LlmOutput", "EffectInput", "StepInput"}
    assert all(v["objects_us"] > 0 and v["strings_us"] > 0 for v in decodes.values())
    statements = json.loads((tmp_path / "pg_statement.json").read_text())
    assert set(statements["per_statement"]) == {"blocking", "asyncio x1", "asyncio x4"}
    assert statements["args"]["url"] == redact_url(pg_url)  # written without any password


def _resume_latency(monkeypatch, tmp_path):
    monkeypatch.setenv("CHECKPOINT_BENCH_DIR", str(tmp_path))
    monkeypatch.syspath_prepend(str(BENCH))
    import resume_latency

    return resume_latency


def test_resume_figures_take_a_kill_that_landed_between_steps(tmp_path, monkeypatch):
    """A kill row with no step (the kill came between two steps) once crashed figures() with
    `'<' not supported between 'NoneType' and 'int'`, after minutes of work."""
    from checkpoint_tui.ledger.store import connect, create_run, record_worker_event, upsert_step
    from checkpoint_tui.settings import Settings

    bench = _resume_latency(monkeypatch, tmp_path)
    home = Settings(home=tmp_path / "home")
    home.ensure_dirs()
    conn = connect(home.db_path)
    run_id = "run-20260101-000000-beef"
    create_run(conn, run_id, 3, 0.0, "offline", "q")
    upsert_step(conn, run_id, 1, "completed", started_at=1.0, ended_at=1.5)
    record_worker_event(conn, "kill", 4242, run_id=run_id, step=2, at=2.0)
    record_worker_event(conn, "kill", 4243, run_id=run_id, step=None, at=3.0)
    figures = bench.figures(home, run_id, 0.0)
    assert figures["kills"] == 2 and figures["killed_steps"] == [2] and figures["step_work_s"] == 0.5


def test_resume_bench_stops_its_dev_server_when_a_mode_fails(tmp_path, monkeypatch):
    """It left the dev server it started running when it crashed (the next invocation adopted it)."""
    from checkpoint_tui.ops import devserver

    bench = _resume_latency(monkeypatch, tmp_path)
    stopped = []

    async def no_server(home):
        return "127.0.0.1:1", None

    async def failing_mode(*args):
        raise RuntimeError("a mode failed")

    monkeypatch.setattr(bench, "connect", no_server)
    monkeypatch.setattr(bench, "run_mode", failing_mode)
    monkeypatch.setattr(devserver, "stop_devserver", stopped.append)
    monkeypatch.setattr(sys, "argv", ["resume_latency.py", "--modes", "spare"])
    with pytest.raises(RuntimeError, match="a mode failed"):
        asyncio.run(bench.main())
    assert [home.home.name for home in stopped] == ["resume-server"]


def test_suite_cpu_puts_a_test_file_s_cpu_down_to_it(tmp_path):
    """bench/suite_cpu.py over one small test file, in pytest's own process (no xdist: the cheapest run that
    names its test): the file is named with CPU of its own, and the machine's CPU is printed beside it."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / "suite_cpu.py"), "--top", "3"]
        + ["--", "-q", "-n", "0", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-p", "no:anyio"]
        + ["tests/test_keyed_table.py"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCH.parent,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    files = proc.stdout.split("costliest 3 test files:")[1].split("costliest 3 tests:")[0]
    line = next(line for line in files.splitlines() if "tests/test_keyed_table.py" in line)
    assert float(line.split()[0]) > 0 and "the machine's CPU" in proc.stdout, proc.stdout
