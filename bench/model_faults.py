"""Model faults on every example agent (#53's first acceptance line): a 10 s storm of 429s, then three
503s, a cut answer and a garbled tool call, each agent's model over HTTP through the lab's proxy to
examples/agents/scripted_model.py (OpenAI-compatible, or Anthropic's Messages API for the agents whose
client speaks it), the guarded workflow of each, in a fresh home.

    .venv/bin/python bench/model_faults.py [--agents pydantic-ai,strands,...] [--temporal-address HOST:PORT]

Prints per agent: the verdict and the run's end, what was duplicated (the audit's), the model requests
Temporal re-ran and the tokens paid twice for them; per fault: the requests it met and their statuses,
the tokens billed for them, the requests until a usable answer and the time from the fault's start to
it, and what the agent did about it. Writes run/bench/model_faults.json (and each chaos command's output
and report beside it). Without --temporal-address, each home starts its own dev server and stops it
after."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent / "examples" / "agents"))
from scripted_model import ScriptedModel  # noqa: E402

from _common import OUT_DIR, ROOT, write_result  # noqa: E402

AGENTS = ROOT / "examples" / "agents"
OPENAI, ANTHROPIC = "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"
# agent: (worker command, guarded workflow, the endpoint variable its model client reads)
EXAMPLES = {
    "pydantic-ai": (f"{sys.executable} {AGENTS / 'pydantic_ai_mailer' / 'worker.py'}", "PydanticMailerGuarded", OPENAI),
    "openai-agents": (
        f"{sys.executable} {AGENTS / 'openai_agents_mailer' / 'worker.py'}",
        "OpenAIMailerGuarded",
        OPENAI,
    ),
    "strands": (f"{sys.executable} {AGENTS / 'strands_mailer' / 'worker.py'}", "StrandsMailerGuarded", OPENAI),
    "langgraph": (f"{sys.executable} {AGENTS / 'langgraph_mailer' / 'worker.py'}", "LangGraphMailerGuarded", ANTHROPIC),
    "deepagents": (
        f"{sys.executable} {AGENTS / 'deepagents_mailer' / 'worker.py'}",
        "DeepAgentsMailerGuarded",
        ANTHROPIC,
    ),
    "google-adk": (
        f"{sys.executable} {AGENTS / 'google_adk_mailer' / 'worker.py'}",
        "GoogleAdkMailerGuarded",
        ANTHROPIC,
    ),
    "ai-sdk (ts)": (f"node {ROOT / 'examples' / 'ts' / 'lib' / 'worker.js'}", "TsAgentMailerGuarded", OPENAI),
}
# A counted fault waits for its requests (the next event waits for it). Each comes a few seconds after
# the one before, so that what one cost is not the next one's: the time to a usable answer of a fault
# stops at the first answer after it, which a fault right behind it would hold back.
EVENTS = [
    {"at_s": 0.3, "nemesis": "model-rate-limit", "duration_s": 10, "retry_after_s": 1},
    {"at_s": 14.0, "nemesis": "model-error", "requests": 3, "status": 503, "duration_s": 60},
    {"at_s": 18.0, "nemesis": "model-cut", "requests": 1, "duration_s": 60},
    {"at_s": 21.0, "nemesis": "model-garbage", "requests": 1, "duration_s": 60},
]
INPUT = {"turns": 16, "pace": 0.5, "think": 0.1}  # long enough to meet the last one


def one(agent: str, address: str | None, scratch: Path) -> dict:
    command, workflow, variable = EXAMPLES[agent]
    home = scratch / agent.split()[0]
    home.mkdir(parents=True)
    (home / "faults.json").write_text(json.dumps({"events": EVENTS}))
    model = ScriptedModel().start()
    url = model.url if variable == OPENAI else model.root
    lab = ["--home", str(home), "--worker-cmd", command, "--model-endpoint", f"{variable}={url}"]
    lab += ["--temporal-address", address] if address else []
    lab += ["--effects", f"file:{home / 'example-out'}"] if command.startswith("node") else []
    cli = [sys.executable, "-m", "checkpoint_tui", *lab]
    began = time.monotonic()
    try:
        out = subprocess.run(
            [*cli, "chaos", "--workflow", workflow, "--input", json.dumps(INPUT)]
            + ["--schedule", str(home / "faults.json"), "--json", str(home / "r.json")],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=ROOT,
        )
    finally:
        subprocess.run([*cli, "stop"], capture_output=True, timeout=120, cwd=ROOT)
        model.close()
    wall = time.monotonic() - began
    (OUT_DIR / f"model_faults-{agent.split()[0]}.out").write_text(out.stdout + out.stderr)
    report = json.loads((home / "r.json").read_text())
    (OUT_DIR / f"model_faults-{agent.split()[0]}.json").write_text(json.dumps(report, indent=1))
    audit = report["audit"]
    spells = report["fleet"]["models"][variable]["spells"]
    return {
        "agent": agent,
        "exit": out.returncode,
        "status": audit.get("workflow_status"),
        "duplicated": audit.get("duplicated"),
        "model_reruns": len(audit.get("model_reruns") or []),
        "tokens_paid_again": audit.get("tokens_paid_again"),
        "not_fired": [n.get("kind") for n in report.get("not_fired", [])],
        "spells": [
            {
                k: s.get(k)
                for k in ("fault", "met", "statuses", "tokens_billed", "asked_after", "recovered_s", "answered_by")
            }
            for s in spells
        ],
        "wall_s": round(wall, 1),
    }


def show(r: dict) -> None:
    verdict = "PASS" if r["exit"] == 0 else f"exit {r['exit']}"
    print(
        f"{r['agent']}: {verdict} · {r['status']} · duplicated {r['duplicated']} · model requests re-run by Temporal "
        f"{r['model_reruns']} ({r['tokens_paid_again']} tokens paid again) · not fired {r['not_fired'] or 'none'} "
        f"· wall {r['wall_s']} s"
    )
    for s in r["spells"]:
        statuses = " ".join(f"{k} x{v}" for k, v in s["statuses"].items())
        recovered = f"{s['recovered_s']:.2f} s" if s["recovered_s"] is not None else "none"
        print(
            f"  {s['fault']:<17} met {s['met']:>2} ({statuses}) · {s['tokens_billed']} tokens billed · "
            f"asked {s['asked_after']} more · usable answer after {recovered} · {s['answered_by']}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", default=",".join(EXAMPLES), help="a comma-separated subset of: " + ", ".join(EXAMPLES))
    p.add_argument("--temporal-address", default=None, help="a running server (default: each home starts its own)")
    args = p.parse_args()
    chosen = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in EXAMPLES]
    if unknown:
        p.error(f"unknown agent(s): {', '.join(unknown)}")
    if any(EXAMPLES[a][0].startswith("node") for a in chosen) and not (ROOT / "examples/ts/lib/worker.js").is_file():
        p.error("examples/ts is not built (make test builds it)")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="model-faults-"))
    try:
        results = []
        for agent in chosen:
            results.append(one(agent, args.temporal_address, scratch))
            show(results[-1])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"wrote {write_result('model_faults', {'events': EVENTS, 'input': INPUT, 'agents': results})}")


if __name__ == "__main__":
    main()
