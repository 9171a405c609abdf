"""The agents conformance table: each framework's mailer (examples/agents), blind and guarded, under one
seeded chaos schedule aimed at its tools. Per row: the framework and version, tool calls re-executed,
emails duplicated in the mail file (what the world received), at risk per the audit, model requests
re-run, and the recovery time (kill -> the next worker at work) per class of the activity the kill
landed in. Runs the real CLI in a fresh home per row; prints a Markdown table and writes JSON.

    .venv/bin/python bench/conformance.py [--seed 3] [--kills 4] [--turns 10] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "agents"
ROWS = [
    ("pydantic-ai", f"pydantic-ai-slim {version('pydantic-ai-slim')}", "pydantic_ai_mailer", "PydanticMailer"),
    ("openai-agents", f"openai-agents {version('openai-agents')} + temporalio-openai-agents "
     f"{version('temporalio-openai-agents')}", "openai_agents_mailer", "OpenAIMailer"),
    ("langgraph", f"langgraph {version('langgraph')} + temporalio-langgraph {version('temporalio-langgraph')}",
     "langgraph_mailer", "LangGraphMailer"),
    ("strands", f"strands-agents {version('strands-agents')} + temporalio-strands-agents "
     f"{version('temporalio-strands-agents')}", "strands_mailer", "StrandsMailer"),
    ("google-adk", f"google-adk {version('google-adk')} + temporalio-google-adk {version('temporalio-google-adk')}",
     "google_adk_mailer", "GoogleAdkMailer"),
    ("deepagents", f"deepagents {version('deepagents')} + temporalio-deepagents {version('temporalio-deepagents')}",
     "deepagents_mailer", "DeepAgentsMailer"),
]  # fmt: skip


def run_row(folder: str, workflow: str, args: argparse.Namespace, home: Path) -> dict:
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLES / folder / 'worker.py'))}"
    report_path = home / "chaos.json"
    base = [sys.executable, "-m", "checkpoint_tui", "--home", str(home), "--worker-cmd", cmd]
    started = time.monotonic()
    try:
        out = subprocess.run([*base, "chaos", "--workflow", workflow, "--input", json.dumps({"turns": args.turns}),
                              "--aim", "tool", "--seed", str(args.seed), "--kills", str(args.kills), "--json",
                              str(report_path)], capture_output=True, text=True, timeout=600)  # fmt: skip
    finally:
        subprocess.run([*base, "stop"], capture_output=True, timeout=60)
    if not report_path.exists():
        raise SystemExit(f"{workflow}: no report (exit {out.returncode}): {out.stderr[-500:]}")
    report = json.loads(report_path.read_text())
    audit, run_id = report["audit"], report["run_id"]
    lines = Counter((home / "example-out" / f"{run_id}.txt").read_text().splitlines())
    by_class: dict[str, list[float]] = defaultdict(list)
    for k in report["kills"]:
        if k["kind"].startswith("worker") and k.get("restart_s") is not None:
            where = k.get("class", "?") if k.get("landed") != "after it closed" else "next activity"
            by_class[where].append(k["restart_s"])
    return {
        "workflow": workflow, "exit": out.returncode, "wall_s": round(time.monotonic() - started, 1),
        "tools_re_executed": sum(r["class"] in ("tool", "mcp") for r in audit["re_executed"]),
        "duplicated_emails": sum(n - 1 for n in lines.values() if n > 1), "emails": sum(lines.values()),
        "at_risk": len(audit["at_risk"]), "model_requests_re_run": len(audit["model_reruns"]),
        "recovery_s": {c: round(statistics.median(v), 2) for c, v in sorted(by_class.items())},
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--kills", type=int, default=4)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--json", type=Path, default=ROOT / "run" / "bench" / "conformance.json")
    args = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="conformance-") as root:
        for i, (name, label, folder, workflow) in enumerate(ROWS):
            for suffix in ("", "Guarded"):
                row = run_row(folder, workflow + suffix, args, Path(root) / f"h{i}{suffix}")
                results.append({"framework": name, "version": label, **row})
                print(f"  {workflow + suffix}: exit {row['exit']} in {row['wall_s']} s", file=sys.stderr, flush=True)
    print(f"seed {args.seed}, --kills {args.kills}, --aim tool, {args.turns} turns ({2 * args.turns + 1} activities)")
    print("| framework | workflow | verdict | tool calls re-executed | emails duplicated | at risk | "
          "model requests re-run | recovery, median (by class killed) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        rec = ", ".join(f"{c} {s:.2f} s" for c, s in r["recovery_s"].items()) or "—"
        print(f"| {r['version']} | {r['workflow']} | {'PASS' if r['exit'] == 0 else 'FAIL'} | "
              f"{r['tools_re_executed']} | {r['duplicated_emails']} of {r['emails']} | {r['at_risk']} | "
              f"{r['model_requests_re_run']} | {rec} |")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"seed": args.seed, "kills": args.kills, "turns": args.turns,
                                     "rows": results}, indent=2))  # fmt: skip
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
