"""Model faults under chaos (#53): `--model-endpoint OPENAI_BASE_URL=URL` puts the model proxy between a
user's worker and its OpenAI-compatible model (the stand-in server); a schedule's model-* events are
what the agent's requests meet, and the report says what each cost, from the proxy's record."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

from checkpoint_tui.proof.chaos.model_outcome import AGENT, FAILED, TEMPORAL
from conftest import queue_of, run_cli, worker_flags
from model_server import StandIn
from test_agents_lab import ALL_WORKERS, EXAMPLES, sent
from test_ts_worker import outbox

sys.path.insert(1, str(EXAMPLES))
from scripted_model import ScriptedModel  # noqa: E402

WORKER = Path(__file__).with_name("model_worker.py")
OPENAI, ANTHROPIC = "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"
# What every example agent meets: a 429 storm past its model client's own retries (so Temporal retries
# the model request), one tool call whose arguments are not JSON, half a second of 503s.
AGENT_FAULTS = [
    {"at_s": 0.2, "nemesis": "model-rate-limit", "requests": 4, "retry_after_s": 0},
    {"at_s": 1.5, "nemesis": "model-garbage", "requests": 1},
    {"at_s": 2.5, "nemesis": "model-error", "duration_s": 0.5},
]
# The examples whose model client speaks Anthropic's Messages API (langchain-anthropic, ADK's Claude).
OVER_ANTHROPIC = {
    "langgraph": ("LangGraphMailerGuarded", EXAMPLES / "langgraph_mailer" / "worker.py"),
    "deepagents": ("DeepAgentsMailerGuarded", EXAMPLES / "deepagents_mailer" / "worker.py"),
    "google-adk": ("GoogleAdkMailerGuarded", EXAMPLES / "google_adk_mailer" / "worker.py"),
}


def chaos_through(
    flags: list[str], url: str, home: Path, workflow: str, run_input: dict, events: list[dict], name: str = OPENAI
):
    """`chaos` on `workflow` with `events` as its schedule file, the lab's model endpoint `name` at `url`
    (through the proxy), the lab stopped after; (the command, its report)."""
    schedule, report_path = home / "model.json", home / "r.json"
    home.mkdir(parents=True, exist_ok=True)
    schedule.write_text(json.dumps({"events": events}))
    lab = [*flags, "--model-endpoint", f"{name}={url}"]
    try:
        out = run_cli(
            *lab,
            "chaos",
            "--workflow",
            workflow,
            "--input",
            json.dumps(run_input),
            "--schedule",
            str(schedule),
            "--json",
            str(report_path),
            timeout=240,
        )
        return out, json.loads(report_path.read_text())
    finally:
        run_cli(*lab, "stop", timeout=60)


def test_a_rate_limit_storm_and_an_outage_are_retried_through_and_each_is_costed(tmp_path: Path, temporal_address):
    standin = StandIn().start()
    events = [
        {"at_s": 0.3, "nemesis": "model-rate-limit", "requests": 2, "retry_after_s": 1},
        # counted in requests, not seconds: on a loaded machine a 0.6 s spell could fall between two
        {"at_s": 2.0, "nemesis": "model-error", "requests": 1, "status": 500},
    ]
    # its re-runs are model requests: no side effect of their own
    flags = [*worker_flags(tmp_path / "home", WORKER, "mf", address=temporal_address), "--model-activities", "ask"]
    try:
        out, report = chaos_through(
            flags, f"{standin.url}/v1", tmp_path / "home", "AskModel", {"turns": 6, "pace": 0.4}, events
        )
    finally:
        standin.stop()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert audit["workflow_status"] == "COMPLETED" and audit["lost_work_count"] == 0 and audit["at_risk"] == []
    endpoint = report["fleet"]["models"]["OPENAI_BASE_URL"]
    storm, outage = endpoint["spells"]
    # each attempt a fault failed was asked again: counted in attempts, not activities (on a loaded machine the
    # storm's retries can still be under way when the 500 comes, and meet it: one activity at attempt 4)
    failed = sum(r["attempt"] - 1 for r in audit["model_reruns"])
    assert audit["model_reruns"] and 2 <= failed <= storm["met"] + outage["met"], audit["model_reruns"]
    assert (storm["fault"], storm["met"], storm["statuses"]) == ("model-rate-limit", 2, {"429": 2}), storm
    assert outage["fault"] == "model-error" and outage["met"] >= 1 and set(outage["statuses"]) == {"500"}, outage
    for spell in (storm, outage):
        assert spell["asked_after"] >= 1 and spell["recovered_s"] is not None and spell["tokens_billed"] == 0
        assert spell["answered_by"] == TEMPORAL  # its activity fails on any 4xx/5xx: Temporal asks again
    # every turn's answer came from the stand-in; each faulted request was asked again through the proxy
    assert len(standin.chats()) == 6 and endpoint["requests"] == 6 + storm["met"] + outage["met"]
    assert (
        "model endpoint OPENAI_BASE_URL: " in out.stdout and "model-rate-limit: met 2 request(s) (429 x2)" in out.stdout
    )


def test_seeded_model_faults_alone_are_fired_met_and_costed(tmp_path: Path, temporal_address):
    """`chaos --kills 0 --model-faults 3`: no worker death, three seeded faults on the agent's model
    requests, whose endpoint is the environment's OPENAI_BASE_URL (no --model-endpoint); each one fired
    met its requests, and the run passes."""
    standin = StandIn().start()
    home, report_path = tmp_path / "home", tmp_path / "r.json"
    flags = [*worker_flags(home, WORKER, "mf", address=temporal_address), "--model-activities", "ask"]
    environment = {OPENAI: f"{standin.url}/v1"}
    try:
        out = run_cli(
            *flags,
            *("chaos", "--workflow", "AskModel", "--input", json.dumps({"turns": 8, "pace": 0.3})),
            *("--kills", "0", "--model-faults", "3", "--seed", "2", "--json", str(report_path)),
            env=environment,
            timeout=240,
        )
    finally:
        run_cli(*flags, "stop", env=environment, timeout=60)
        standin.stop()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    report = json.loads(report_path.read_text())
    assert [e["nemesis"][:6] for e in report["schedule"]] == ["model-"] * 3, report["schedule"]
    assert report["kills"] == [] and report["audit"]["workflow_status"] == "COMPLETED"
    spells = report["fleet"]["models"]["OPENAI_BASE_URL"]["spells"]
    fired = [p for p in report["pauses"] if p["kind"].startswith("model-")]
    assert len(spells) == len(fired) >= 2 and all(s["met"] >= 1 for s in spells), (spells, report["not_fired"])
    assert len(fired) + len(report["not_fired"]) == 3


def test_a_model_fault_needs_its_endpoint_and_a_bad_endpoint_is_one_line(tmp_path: Path):
    home, schedule = tmp_path / "home", tmp_path / "model.json"
    schedule.write_text(json.dumps({"events": [{"at_s": 1, "nemesis": "model-cut", "requests": 1}]}))
    flags = worker_flags(home, WORKER, "mf")
    run = ["chaos", "--workflow", "AskModel", "--schedule", str(schedule)]
    try:
        missing = run_cli(*flags, *run, env={OPENAI: "", ANTHROPIC: ""}, timeout=60)  # none in the environment
        bad = run_cli(*flags, "--model-endpoint", "OPENAI_BASE_URL=http://k:secret@127.0.0.1:1/v1", *run, timeout=60)
    finally:
        run_cli(*flags, "stop", timeout=60)  # nothing to stop, unless a refusal came too late
    assert missing.returncode == 2 and "name one of --model-endpoint (none given)" in missing.stderr, missing.stderr
    assert bad.returncode == 2 and "holds an @" in bad.stderr and "secret" not in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) <= 2  # argparse's usage line, then the one reason
    assert not (home / "run" / "temporal.db").exists()  # refused before anything started


@pytest.mark.parametrize(
    ("framework", "workflow"),
    [
        ("pydantic-ai", "PydanticMailerGuarded"),
        ("openai-agents", "OpenAIMailerGuarded"),
        ("strands", "StrandsMailerGuarded"),
    ],
)
def test_a_guarded_agent_meets_a_429_storm_garbled_tool_calls_and_an_outage_and_sends_each_email_once(
    framework: str, workflow: str, session_root: Path, temporal_address
):
    """An example agent with its model over HTTP (examples/agents/scripted_model.py, the same script as
    its in-process model) through the proxy: a storm of 429s longer than the OpenAI client's own
    retries (so Temporal retries the model request's activity), a tool call whose arguments are not
    JSON, a spell of 503s. Each email at most once; the garbled call ends as the framework's policy
    says: pydantic-ai and Strands (its OpenAIModel, streamed) ask the model again and the run completes
    (PASS), Temporal's OpenAI Agents integration fails the workflow on it (FAIL, the failure named)."""
    model = ScriptedModel().start()
    home = session_root / f"mf-{framework}"
    flags = worker_flags(home, ALL_WORKERS[framework], "agents", address=temporal_address)
    try:
        run_input = {"turns": 4, "pace": 0.3, "think": 0.1}
        out, report = chaos_through(flags, model.url, home, workflow, run_input, AGENT_FAULTS)
    finally:
        model.close()
    spells = {s["fault"]: s for s in report["fleet"]["models"]["OPENAI_BASE_URL"]["spells"]}
    storm, garbage = spells["model-rate-limit"], spells["model-garbage"]
    assert storm["met"] == 4 and storm["statuses"] == {"429": 4}, storm
    assert garbage["met"] == 1 and garbage["tokens_billed"] > 0, garbage
    assert report["audit"]["model_reruns"], report["audit"]  # the storm outlasted the client: Temporal retried
    assert "model-garbage: met 1 request(s) (200 x1)" in out.stdout
    mail = home / "example-out" / f"{report['run_id']}.txt"  # none if the run failed before its first send
    emails = sent(home, report["run_id"]) if mail.exists() else Counter()
    assert set(emails.values()) <= {1}, emails  # never twice, whatever the run's end
    assert storm["answered_by"] == TEMPORAL, storm  # the storm outlasted the client's own 2 retries
    if framework != "openai-agents":  # their policy: a call they cannot parse goes back to the model
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
        assert len(emails) == 4 and storm["recovered_s"] is not None and garbage["recovered_s"] is not None
        assert garbage["answered_by"] == AGENT, garbage
    else:  # Temporal's OpenAI Agents integration (activity_as_tool, and ours): the run fails on it, said so
        assert garbage["answered_by"] == FAILED, garbage
        assert out.returncode == 1 and report["audit"]["workflow_status"] == "FAILED", out.stdout[-3000:]
        assert "invalid arguments for tool send_email_guarded: JSONDecodeError" in out.stdout
        assert report["audit"]["duplicated"] == 0 and report["audit"]["at_risk"] == []


@pytest.mark.parametrize("framework", sorted(OVER_ANTHROPIC))
def test_an_agent_on_anthropic_s_api_meets_the_same_faults_and_sends_each_email_once(
    framework: str, session_root: Path, temporal_address
):
    """The LangGraph, Deep Agents and Google ADK examples with ANTHROPIC_BASE_URL given by the lab: their
    model clients (langchain-anthropic, ADK's AnthropicLlm) speak Anthropic's Messages API to the
    scripted model, through the proxy, under the Python agents' storm, garbled call and outage. A
    garbled tool_use input fails the model request's activity (no framework parses a string where its
    object should be): Temporal asks again; each email once, PASS."""
    workflow, worker = OVER_ANTHROPIC[framework]
    model = ScriptedModel().start()
    home = session_root / f"mf-{framework}"
    flags = worker_flags(home, worker, "agents", address=temporal_address)
    try:
        run_input = {"turns": 4, "pace": 0.3, "think": 0.1}
        out, report = chaos_through(flags, model.root, home, workflow, run_input, AGENT_FAULTS, name=ANTHROPIC)
    finally:
        model.close()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    spells = {s["fault"]: s for s in report["fleet"]["models"][ANTHROPIC]["spells"]}
    storm, garbage = spells["model-rate-limit"], spells["model-garbage"]
    assert storm["met"] == 4 and storm["statuses"] == {"429": 4} and storm["recovered_s"] is not None, storm
    assert garbage["met"] == 1 and garbage["tokens_billed"] > 0 and garbage["recovered_s"] is not None, garbage
    assert report["audit"]["model_reruns"] and report["audit"]["at_risk"] == [], report["audit"]
    assert (storm["answered_by"], garbage["answered_by"]) == (TEMPORAL, TEMPORAL), spells
    emails = sent(home, report["run_id"])
    assert len(emails) == 4 and set(emails.values()) == {1}, emails


def test_gameday_s_model_outage_holds_on_the_pydantic_ai_mailer(session_root: Path, temporal_address):
    """gameday --scenarios model-outage: 4 s of 429s, 3 s of 503s, two answers cut, one tool call
    garbled, on two guarded runs long enough to meet them all: held, each email once."""
    model = ScriptedModel().start()
    home, out_dir = session_root / "mf-gameday", session_root / "mf-gameday-out"
    flags = [
        *worker_flags(home, ALL_WORKERS["pydantic-ai"], "agents", address=temporal_address),
        "--model-endpoint",
        f"OPENAI_BASE_URL={model.url}",
    ]
    try:
        done = run_cli(
            *flags,
            "gameday",
            "--workflow",
            "PydanticMailerGuarded",
            "--input",
            json.dumps({"turns": 12, "pace": 0.6, "think": 0.2}),
            "--scenarios",
            "model-outage",
            "--runs",
            "2",
            "--out",
            str(out_dir),
            timeout=400,
        )
    finally:
        run_cli(*flags, "stop", timeout=60)
        model.close()
    assert done.returncode == 0 and "1/1 experiments held" in done.stdout, done.stdout[-4000:] + done.stderr[-2000:]
    (experiment,) = json.loads((out_dir / "gameday.json").read_text())["experiments"]
    report = experiment["report"]
    assert report["totals"]["runs_completed"] == 2 and report["totals"]["duplicated"] == 0, report["totals"]
    spells = {s["fault"]: s for s in report["fleet"]["models"]["OPENAI_BASE_URL"]["spells"]}
    assert set(spells) == {"model-rate-limit", "model-error", "model-cut", "model-garbage"}, spells
    assert all(s["met"] >= 1 and s["recovered_s"] is not None for s in spells.values()), spells
    for run in report["runs"]:
        emails = sent(home, run["run_id"])
        assert len(emails) == 12 and set(emails.values()) == {1}, emails
    assert "model endpoint `OPENAI_BASE_URL`" in (out_dir / "gameday.md").read_text()


TS_AGENT = Path(__file__).resolve().parent.parent / "examples" / "ts"


@pytest.mark.skipif(
    shutil.which("node") is None or not (TS_AGENT / "lib" / "worker.js").is_file(),
    reason="node, or examples/ts built (`make test` installs it with npm and compiles it with tsc), not here",
)
def test_the_typescript_agent_meets_the_same_faults_and_sends_each_email_once(session_root: Path, temporal_address):
    """The AI SDK agent (examples/ts, Temporal's AI SDK plugin) with OPENAI_BASE_URL given by the lab:
    its model is the Python stand-in's script over HTTP, through the proxy, under the same storm,
    garbled call and outage as the Python agents."""
    model = ScriptedModel().start()
    home = session_root / "mf-ts"
    flags = [
        *("--home", str(home), "--worker-cmd", f"node {TS_AGENT / 'lib' / 'worker.js'}"),
        *("--task-queue", queue_of("ts-mf", home), "--temporal-address", temporal_address),
        *("--effects", f"file:{home}/example-out"),
    ]
    try:
        run_input = {"turns": 4, "pace": 0.3, "think": 0.1}
        out, report = chaos_through(flags, model.url, home, "TsAgentMailerGuarded", run_input, AGENT_FAULTS)
    finally:
        model.close()
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    spells = {s["fault"]: s for s in report["fleet"]["models"]["OPENAI_BASE_URL"]["spells"]}
    storm, garbage = spells["model-rate-limit"], spells["model-garbage"]
    assert storm["met"] == 4 and storm["statuses"] == {"429": 4} and storm["recovered_s"] is not None, storm
    assert garbage["met"] == 1 and garbage["tokens_billed"] > 0 and garbage["recovered_s"] is not None, garbage
    audit = report["audit"]
    assert audit["framework"] == "ai-sdk" and audit["model_reruns"] and audit["at_risk"] == [], audit
    assert Counter(outbox(home).values()) == Counter({1: 4})  # its policy: the garbled call asked again
    assert (storm["answered_by"], garbage["answered_by"]) == (TEMPORAL, AGENT), spells
