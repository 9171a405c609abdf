"""The agents conformance table and their recovery after a kill, in one invocation.

Table: each framework's mailer (examples/agents), blind and guarded, under one seeded chaos schedule
aimed at its tools. Per row: the framework and version, tool calls re-executed, emails duplicated in
the mail file (what the world received), at risk per the audit, model requests re-run, and the
recovery time (kill -> the next worker at work) per class of the activity the kill landed in.

Recovery: each guarded mailer under a schedule of --recovery-kills worker kills, each inside an
activity (every third one, so model requests and tool calls alternate), run twice: with the preloaded
spare (a fork of a process that has done the worker command's imports) and with --no-spare (every
replacement a cold start). Per framework and class of the killed activity: kill -> that activity's
next attempt started (Temporal's start time of the retry), median and range, and the ratio.

Runs the real CLI in a fresh home per row; prints Markdown tables and writes JSON.

    .venv/bin/python bench/conformance.py [--part table|recovery|all] [--seed 3] [--kills 4] [--turns 10]
                                          [--recovery-kills 10] [--only FRAMEWORK,...] [--json PATH]
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
    (
        "openai-agents",
        f"openai-agents {version('openai-agents')} + temporalio-openai-agents {version('temporalio-openai-agents')}",
        "openai_agents_mailer",
        "OpenAIMailer",
    ),
    (
        "langgraph",
        f"langgraph {version('langgraph')} + temporalio-langgraph {version('temporalio-langgraph')}",
        "langgraph_mailer",
        "LangGraphMailer",
    ),
    (
        "strands",
        f"strands-agents {version('strands-agents')} + temporalio-strands-agents "
        f"{version('temporalio-strands-agents')}",
        "strands_mailer",
        "StrandsMailer",
    ),
    (
        "google-adk",
        f"google-adk {version('google-adk')} + temporalio-google-adk {version('temporalio-google-adk')}",
        "google_adk_mailer",
        "GoogleAdkMailer",
    ),
    (
        "deepagents",
        f"deepagents {version('deepagents')} + temporalio-deepagents {version('temporalio-deepagents')}",
        "deepagents_mailer",
        "DeepAgentsMailer",
    ),
]


def chaos(folder: str, workflow: str, home: Path, flags: list[str], chaos_args: list[str]) -> tuple[int, dict]:
    """One `chaos --workflow` run of the example's worker in `home` (stopped after); (exit, report)."""
    cmd = f"{shlex.quote(sys.executable)} {shlex.quote(str(EXAMPLES / folder / 'worker.py'))}"
    report_path = home / "chaos.json"
    base = [sys.executable, "-m", "checkpoint_tui", "--home", str(home), "--worker-cmd", cmd, *flags]
    try:
        out = subprocess.run(
            [*base, "chaos", "--workflow", workflow, *chaos_args, "--json", str(report_path)],
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        subprocess.run([*base, "stop"], capture_output=True, timeout=60)
    if not report_path.exists():
        raise SystemExit(f"{workflow}: no report (exit {out.returncode}): {out.stderr[-500:]}")
    return out.returncode, json.loads(report_path.read_text())


def run_row(folder: str, workflow: str, args: argparse.Namespace, home: Path) -> dict:
    started = time.monotonic()
    returncode, report = chaos(
        folder,
        workflow,
        home,
        [],
        [
            "--input",
            json.dumps({"turns": args.turns}),
            "--aim",
            "tool",
            "--seed",
            str(args.seed),
            "--kills",
            str(args.kills),
        ],
    )
    audit, run_id = report["audit"], report["run_id"]
    lines = Counter((home / "example-out" / f"{run_id}.txt").read_text().splitlines())
    by_class: dict[str, list[float]] = defaultdict(list)
    for k in report["kills"]:
        if k["kind"].startswith("worker") and k.get("restart_s") is not None:
            where = k.get("class", "?") if k.get("landed") != "after it closed" else "next activity"
            by_class[where].append(k["restart_s"])
    return {
        "workflow": workflow,
        "exit": returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "tools_re_executed": sum(r["class"] in ("tool", "mcp") for r in audit["re_executed"]),
        "duplicated_emails": sum(n - 1 for n in lines.values() if n > 1),
        "emails": sum(lines.values()),
        "at_risk": len(audit["at_risk"]),
        "model_requests_re_run": len(audit["model_reruns"]),
        "recovery_s": {c: round(statistics.median(v), 2) for c, v in sorted(by_class.items())},
    }


def recovery_row(folder: str, workflow: str, args: argparse.Namespace, home: Path, cold: bool) -> dict:
    """The guarded mailer under worker kills inside activities: kill -> the activity's next attempt."""
    home.mkdir(parents=True)
    turns = (3 * args.recovery_kills + 3) // 2  # 2 * turns + 1 activities: room for a kill every third
    events = [
        {"at_step": 2 + 3 * i, "nemesis": "worker-in-activity", "target": "worker", "delay_ms": 60}
        for i in range(args.recovery_kills)
    ]
    schedule = home / "schedule.json"
    schedule.write_text(json.dumps({"steps": 2 * turns + 1, "seed": None, "events": events}))
    started = time.monotonic()
    returncode, report = chaos(
        folder,
        workflow,
        home,
        ["--no-spare"] if cold else [],
        ["--input", json.dumps({"turns": turns}), "--aim", "any", "--schedule", str(schedule)],
    )
    by_class: dict[str, list[float]] = defaultdict(list)
    for k in report["kills"]:
        if k.get("retry_s") is not None:
            by_class[k.get("class", "?")].append(k["retry_s"])
    return {
        "workflow": workflow,
        "cold": cold,
        "exit": returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "retry_s": dict(sorted(by_class.items())),
        "landed": dict(Counter(str(k.get("landed")) for k in report["kills"])),
    }


def _fmt(values: list[float]) -> str:
    if not values:
        return "—"
    return f"**{statistics.median(values):.2f} s** ({min(values):.2f}–{max(values):.2f}, n={len(values)})"


def print_recovery(rows: list[dict], args: argparse.Namespace) -> None:
    print(
        f"\nkill -> the killed activity's next attempt started ({args.recovery_kills} worker kills inside "
        "activities of the guarded mailer, each mode; assisted failover on)"
    )
    print("| framework | class | preloaded spare | cold start (--no-spare) | ratio |")
    print("|---|---|---|---|---|")
    for name in dict.fromkeys(r["framework"] for r in rows):
        warm = next(r for r in rows if r["framework"] == name and not r["cold"])
        cold = next(r for r in rows if r["framework"] == name and r["cold"])
        for cls in sorted(set(warm["retry_s"]) | set(cold["retry_s"])):
            w, c = warm["retry_s"].get(cls, []), cold["retry_s"].get(cls, [])
            ratio = f"{statistics.median(w) / statistics.median(c):.2f}×" if w and c else "—"
            print(f"| {warm['version']} | {cls} | {_fmt(w)} | {_fmt(c)} | {ratio} |")
        both = [*warm["retry_s"].values()], [*cold["retry_s"].values()]
        w_all, c_all = [x for v in both[0] for x in v], [x for v in both[1] for x in v]
        ratio = f"{statistics.median(w_all) / statistics.median(c_all):.2f}×" if w_all and c_all else "—"
        print(f"| {warm['version']} | all | {_fmt(w_all)} | {_fmt(c_all)} | {ratio} |")


def print_table(results: list[dict], args: argparse.Namespace) -> None:
    print(f"seed {args.seed}, --kills {args.kills}, --aim tool, {args.turns} turns ({2 * args.turns + 1} activities)")
    print(
        "| framework | workflow | verdict | tool calls re-executed | emails duplicated | at risk | "
        "model requests re-run | recovery, median (by class killed) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        rec = ", ".join(f"{c} {s:.2f} s" for c, s in r["recovery_s"].items()) or "—"
        print(
            f"| {r['version']} | {r['workflow']} | {'PASS' if r['exit'] == 0 else 'FAIL'} | "
            f"{r['tools_re_executed']} | {r['duplicated_emails']} of {r['emails']} | {r['at_risk']} | "
            f"{r['model_requests_re_run']} | {rec} |"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("table", "recovery", "all"), default="all")
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--kills", type=int, default=4)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--recovery-kills", type=int, default=10)
    p.add_argument("--only", help="comma-separated frameworks (default: all)")
    p.add_argument("--json", type=Path, default=ROOT / "run" / "bench" / "conformance.json")
    args = p.parse_args()
    rows = [r for r in ROWS if not args.only or r[0] in args.only.split(",")]
    results, recovery = [], []
    with tempfile.TemporaryDirectory(prefix="conformance-") as root:
        for i, (name, label, folder, workflow) in enumerate(rows):
            for suffix in ("", "Guarded") if args.part != "recovery" else ():
                row = run_row(folder, workflow + suffix, args, Path(root) / f"h{i}{suffix}")
                results.append({"framework": name, "version": label, **row})
                print(f"  {workflow + suffix}: exit {row['exit']} in {row['wall_s']} s", file=sys.stderr, flush=True)
            for cold in (False, True) if args.part != "table" else ():
                row = recovery_row(folder, workflow + "Guarded", args, Path(root) / f"r{i}{'c' if cold else 'w'}", cold)
                recovery.append({"framework": name, "version": label, **row})
                print(
                    f"  {workflow}Guarded {'cold' if cold else 'preloaded'}: exit {row['exit']} in {row['wall_s']} s "
                    f"{row['landed']}",
                    file=sys.stderr,
                    flush=True,
                )
    if results:
        print_table(results, args)
    if recovery:
        print_recovery(recovery, args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps(
            {"seed": args.seed, "kills": args.kills, "turns": args.turns, "rows": results, "recovery": recovery},
            indent=2,
        )
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
