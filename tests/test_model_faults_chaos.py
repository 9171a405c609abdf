"""Model faults under chaos (#53): `--model-endpoint OPENAI_BASE_URL=URL` puts the model proxy between a
user's worker and its OpenAI-compatible model (the stand-in server); a schedule's model-* events are
what the agent's requests meet, and the report says what each cost, from the proxy's record."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli, worker_flags
from model_server import StandIn

WORKER = Path(__file__).with_name("model_worker.py")


def test_a_rate_limit_storm_and_an_outage_are_retried_through_and_each_is_costed(tmp_path: Path, temporal_address):
    standin = StandIn().start()
    home, schedule, report_path = tmp_path / "home", tmp_path / "model.json", tmp_path / "r.json"
    events = [
        {"at_s": 0.3, "nemesis": "model-rate-limit", "requests": 2, "retry_after_s": 1},
        {"at_s": 2.0, "nemesis": "model-error", "duration_s": 0.6, "status": 500},
    ]
    schedule.write_text(json.dumps({"events": events}))
    flags = [*worker_flags(home, WORKER, "mf", address=temporal_address), "--model-endpoint"]
    try:
        out = run_cli(
            *flags,
            f"OPENAI_BASE_URL={standin.url}/v1",
            "--model-activities",
            "ask",  # its re-runs are model requests: no side effect of their own
            "chaos",
            "--workflow",
            "AskModel",
            "--input",
            json.dumps({"turns": 6, "pace": 0.4}),
            "--schedule",
            str(schedule),
            "--json",
            str(report_path),
            timeout=180,
        )
        report = json.loads(report_path.read_text())
    finally:
        run_cli(*flags[:-1], "stop", timeout=60)
        standin.stop()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED" and audit["lost_work_count"] == 0 and audit["at_risk"] == []
    endpoint = report["fleet"]["models"]["OPENAI_BASE_URL"]
    storm, outage = endpoint["spells"]
    assert 2 <= len(audit["model_reruns"]) <= storm["met"] + outage["met"]  # an attempt a fault failed, asked again
    assert (storm["fault"], storm["met"], storm["statuses"]) == ("model-rate-limit", 2, {"429": 2}), storm
    assert outage["fault"] == "model-error" and outage["met"] >= 1 and set(outage["statuses"]) == {"500"}, outage
    for spell in (storm, outage):
        assert spell["asked_after"] >= 1 and spell["recovered_s"] is not None and spell["tokens_billed"] == 0
    # every turn's answer came from the stand-in; each faulted request was asked again through the proxy
    assert len(standin.chats()) == 6 and endpoint["requests"] == 6 + storm["met"] + outage["met"]
    assert (
        "model endpoint OPENAI_BASE_URL: " in out.stdout and "model-rate-limit: met 2 request(s) (429 x2)" in out.stdout
    )


def test_a_model_fault_needs_its_endpoint_and_a_bad_endpoint_is_one_line(tmp_path: Path):
    home, schedule = tmp_path / "home", tmp_path / "model.json"
    schedule.write_text(json.dumps({"events": [{"at_s": 1, "nemesis": "model-cut", "requests": 1}]}))
    flags = worker_flags(home, WORKER, "mf")
    run = ["chaos", "--workflow", "AskModel", "--schedule", str(schedule)]
    missing = run_cli(*flags, *run, timeout=60)
    assert missing.returncode == 2 and "name one of --model-endpoint (none given)" in missing.stderr, missing.stderr
    bad = run_cli(*flags, "--model-endpoint", "OPENAI_BASE_URL=http://k:secret@127.0.0.1:1/v1", *run, timeout=60)
    assert bad.returncode == 2 and "holds an @" in bad.stderr and "secret" not in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) <= 2  # argparse's usage line, then the one reason
    assert not (home / "run" / "temporal.db").exists()  # refused before anything started
