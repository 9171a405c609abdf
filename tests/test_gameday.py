"""#40, the game day against a fleet of two worker commands on two task queues (examples/fleet: a
workflow worker, an activity worker calling a mail API over HTTP), through the real CLI and the real dev
server: all workers down then back (backlog peak and drain), a deploy that breaks determinism and its
rollback (the failure's reason, how long runs were stuck), the dependency broken three ways (the retries
shown, every guarded send once); and a rollout of a worker that does not shut down gracefully (each
task it lost named, with its wait, failing the verdict: the application's loss, not the lab's kill)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from checkpoint_tui.waiting import wait_until_sync
from conftest import run_cli

FLEET = Path(__file__).resolve().parents[1] / "examples" / "fleet"
PY = sys.executable


@contextlib.contextmanager
def mail_api(tmp_path: Path, delay_ms: int) -> Iterator[str]:
    """The example's mail API on a free loopback port (each send takes `delay_ms`: a stop can land in one)."""
    out = tmp_path / "mail-api.out"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(
            [
                PY,
                str(FLEET / "mail_api.py"),
                "--port",
                "0",
                "--delay-ms",
                str(delay_ms),
                "--log",
                str(tmp_path / "mail.jsonl"),
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        assert wait_until_sync(lambda: "listening" in out.read_text() or proc.poll() is not None, 15)
        yield out.read_text().split("listening ", 1)[1].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _fleet(home: Path, tag: str, address: str, activity_flags: str = "") -> list[str]:
    """The example fleet on `home`, on the session's server (a game day touches no server: it kills
    workers and cuts the network between them and Temporal)."""
    return [
        "--home",
        str(home),
        "--temporal-address",
        address,
        "--worker",
        f"{tag}-wf={PY} {FLEET / 'workflow_worker.py'}",
        "--worker",
        f"{tag}-acts={PY} {FLEET / 'activity_worker.py'}{activity_flags}",
    ]


def _stop(home: Path) -> None:
    run_cli("--home", str(home), "stop", timeout=120)


RUN_INPUT = json.dumps({"count": 8, "pace": 0.5, "activity_queue": "{tag}-acts"})


def _gameday(
    tmp_path: Path, scenario: str, tag: str, address: str, *flags: str
) -> tuple[subprocess.CompletedProcess, dict]:
    """One experiment of the game day on its own home (the experiments of a test suite run side by side);
    its after-action report checked for what every experiment writes; (the command, its experiment)."""
    home, out = tmp_path / "home", tmp_path / "after-action"
    try:
        done = run_cli(
            *_fleet(home, tag, address),
            *flags,
            "gameday",
            "--workflow",
            "FleetMailer",
            "--input",
            RUN_INPUT.replace("{tag}", tag),
            "--scenarios",
            scenario,
            "--runs",
            "3",
            "--down-s",
            "4",
            "--grace-s",
            "5",
            "--out",
            str(out),
            timeout=600,
        )
    finally:
        _stop(home)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "left running" not in done.stdout  # a server it did not start; the fleet's commands stopped with it
    doc = json.loads((out / "gameday.json").read_text())
    assert doc["verdict"] == "PASS" and [e["scenario"] for e in doc["experiments"]] == [scenario]
    md = (out / "gameday.md").read_text()
    assert "## Recovery checklist" in md and f"## {scenario}:" in md
    assert f"Temporal: `{address}`, a server the lab did not start (namespace `default`)" in md
    report = doc["experiments"][0]["report"]
    assert report["temporal"] == {"address": address, "namespace": "default", "started_by_lab": False}
    folder = out / scenario  # its folder, read back from Temporal and the ledger
    assert (folder / "report.json").is_file() and (folder / "junit.xml").is_file()
    assert len(list((folder / "histories").glob("run-*.json"))) == 3
    assert (out / "gameday.junit.xml").is_file()
    return done, doc["experiments"][0]


def test_kill_all_then_back_drains_the_backlog_and_is_audited_per_command(tmp_path: Path, temporal_address: str):
    done, experiment = _gameday(tmp_path, "kill-all", "ka", temporal_address)
    report = experiment["report"]
    commands = {c["queue"]: c for c in report["fleet"]["commands"]}  # the audit per command
    assert commands["ka-wf"].get("died") and commands["ka-acts"].get("died"), commands
    assert commands["ka-wf"].get("respawn") and commands["ka-acts"].get("respawn"), commands
    backlog = report["fleet"]["backlog"]
    assert backlog["samples"] > 0 and set(backlog["queues"]) == {"ka-wf", "ka-acts"}, backlog
    drained = backlog["events"][0]  # its peak and drain time, printed
    assert drained["name"] == "fleet-down" and drained["drain_s"] is not None, drained
    assert "after fleet-down peak" in done.stdout
    assert report["totals"]["duplicated"] == 0 and report["totals"]["lost"] == 0
    assert report["totals"]["runs_completed"] == 3


def test_a_deploy_that_breaks_determinism_is_named_and_its_rollback_completes_the_runs(
    tmp_path: Path, temporal_address: str
):
    _, experiment = _gameday(
        tmp_path, "deploy", "dp", temporal_address, "--deploy", f"dp-wf={PY} {FLEET / 'workflow_worker_v2.py'}"
    )
    report = experiment["report"]
    failures = [f for r in report["runs"] for f in r["audit"]["lost_work"]["task_failures"]]
    assert failures and all(f["cause"] == "non-determinism" and f["until"] is not None for f in failures), failures
    assert all(f["stuck_s"] > 0 for f in failures)  # how long each was stuck, until the rollback let it through
    assert report["totals"]["runs_completed"] == 3
    assert "sigterm" in (tmp_path / "after-action" / "deploy" / "worker-events.csv").read_text()


def test_a_broken_dependency_shows_the_retries_and_each_guarded_send_stays_once(tmp_path: Path, temporal_address: str):
    with mail_api(tmp_path, 200) as api:
        done, experiment = _gameday(tmp_path, "dependency", "dy", temporal_address, "--dependency", f"MAIL_API={api}")
    report = experiment["report"]
    traffic = report["fleet"]["dependencies"]["MAIL_API"]
    assert traffic["closed_by_fault"] >= 1 and traffic["during_faults"] >= 1, traffic  # the retries it caused
    assert report["totals"]["duplicated"] == 0 and report["totals"]["runs_completed"] == 3
    assert "dependency MAIL_API:" in done.stdout


def test_a_rollout_of_a_worker_without_graceful_shutdown_names_each_lost_task(tmp_path: Path, temporal_address: str):
    """Its activity worker exits at once on SIGTERM: a task it held sits out its start-to-close timeout
    and, with maximum_attempts=1, fails its run; the verdict names the task, its wait and the rollout."""
    home = tmp_path / "home"
    schedule = tmp_path / "rollout.json"
    schedule.write_text(
        json.dumps(
            {
                "events": [
                    {
                        "at_s": 1.0,
                        "nemesis": "churn",
                        "queue": "gr-acts",
                        "duration_s": 2.5,
                        "interval_s": 1.0,
                        "fraction": 1.0,
                    }
                ]
            }
        )
    )
    run_input = json.dumps(
        {"count": 4, "pace": 0.1, "activity_queue": "gr-acts", "max_attempts": 1, "start_to_close_s": 2}
    )
    with mail_api(tmp_path, 1000) as api:  # a send takes 1 s: the first SIGTERM lands inside one
        try:
            done = run_cli(
                *_fleet(home, "gr", temporal_address, " --exit-on-sigterm"),
                "--dependency",
                f"MAIL_API={api}",
                "chaos",
                "--workflow",
                "FleetMailer",
                "--input",
                run_input,
                "--schedule",
                str(schedule),
                "--runs",
                "2",
                "--json",
                str(tmp_path / "report.json"),
                timeout=300,
            )
        finally:
            _stop(home)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    lost = [t for r in report["runs"] for t in r["audit"]["lost_work"]["timeouts"] if t["lost"]]
    assert lost, done.stdout[-3000:]
    for t in lost:
        assert t["kind"] == "START_TO_CLOSE" and t["final"] and t["waited_s"] >= 1.9, t
        assert t["cause"] and t["cause"]["graceful"], t  # a rollout's SIGTERM, not a lab SIGKILL
    failed = [c for c in report["checks"] if not c["ok"] and c["name"].startswith("chaos: no lost work")]
    assert failed and "send_receipt" in failed[0]["observed"] and "timed out" in failed[0]["observed"]
    assert "NOT exactly once" not in done.stdout  # lost work is not blamed as a duplicate
