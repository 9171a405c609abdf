"""A node worker's kill -> the killed activity's next attempt: cold (`--workers 1`: the replacement
starts, bundles its workflows, then polls) beside the default spare (a second worker of the command
polls, and assisted failover hands it the attempt at once).

    .venv/bin/python bench/node_spare.py [--example ts_mailer|ts] [--samples 10] [--seed 1] [--input JSON]

Each sample is a worker kill inside or after a tool's activity of a seeded chaos run (`--aim tool`) on
the example's guarded workflow, read from the chaos report (`retry_s` of a worker-* kill: the kill ->
that activity's next attempt started, from history). Seeds go up from --seed until each mode has
--samples worker kills; a run that fails its verdict stops the bench (a spare that is fast and wrong
is no spare). The default input spaces the kills (1 s tools, 0.5 s model requests, 4 kills over 12
turns) beyond a node worker's cold start (2-2.5 s): kills closer than that find the spare's own
replacement still starting (`--input '{"turns": 8, "pace": 0.1, "think": 0.05}'` shows it). Needs
node and the example installed (`make test` installs both). Prints min / median / max per mode and
their ratio; writes run/bench/node_spare.json."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import ROOT, summary, write_result  # noqa: E402

EXAMPLES = {
    "ts_mailer": ("node worker.js", "TsMailerGuarded", ["--model-activities", "think"]),
    "ts": ("node lib/worker.js", "TsAgentMailerGuarded", []),
}
MODES = {"cold": ["--workers", "1"], "spare": []}
INPUT = '{"turns": 12, "pace": 1.0, "think": 0.5}'
MAX_SEEDS = 40


def one_run(example: str, mode: str, seed: int, inp: str) -> tuple[list[tuple[str, float]], str]:
    """The worker kills' retry times of one chaos run, and its verdict line."""
    cmd, workflow, declared = EXAMPLES[example]
    folder = ROOT / "examples" / example
    with tempfile.TemporaryDirectory(prefix="node-spare-") as tmp:
        home = Path(tmp) / "home"
        report = Path(tmp) / "r.json"
        common = ["--home", str(home), "--worker-cmd", cmd, "--task-queue", f"bench-{mode}-{seed}", *declared]
        common += ["--effects", f"file:{home}/example-out", *MODES[mode]]
        chaos = ["chaos", "--workflow", workflow, "--input", inp, "--aim", "tool", "--kills", "4"]
        chaos += ["--seed", str(seed), "--json", str(report)]
        cli = [sys.executable, "-m", "checkpoint_tui"]
        try:
            done = subprocess.run([*cli, *common, *chaos], cwd=folder, capture_output=True, text=True, timeout=600)
        finally:
            subprocess.run([*cli, "--home", str(home), "stop"], capture_output=True, timeout=120)
        if done.returncode != 0 or not report.is_file():
            sys.exit(f"{mode} seed {seed}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        doc = json.loads(report.read_text())
    kills = [k for k in doc["kills"] if k.get("kind", "").startswith("worker-") and k.get("retry_s") is not None]
    return [(k["kind"], float(k["retry_s"])) for k in kills], doc.get("verdict") or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", choices=sorted(EXAMPLES), default="ts_mailer")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--input", default=INPUT, help="the workflow's input (turns, pace, think)")
    args = parser.parse_args()
    folder = ROOT / "examples" / args.example
    if shutil.which("node") is None or not (folder / "node_modules").is_dir():
        sys.exit(f"node, or examples/{args.example}'s packages (make test installs them), not here")
    figures: dict[str, dict] = {}
    for mode in MODES:
        samples: list[float] = []
        seed = args.seed
        while len(samples) < args.samples and seed < args.seed + MAX_SEEDS:
            found, _ = one_run(args.example, mode, seed, args.input)
            samples += [s for _, s in found]
            said = ", ".join(f"{kind} {s:.2f}" for kind, s in found) or "no worker kill"
            print(f"  {mode:5} seed {seed}: {said}", flush=True)
            seed += 1
        figures[mode] = summary(samples[: args.samples])
    cold, spare = figures["cold"]["median"], figures["spare"]["median"]
    for mode, fig in figures.items():
        low, mid, high = fig["min"], fig["median"], fig["max"]
        print(f"{mode:5} kill -> next attempt: n {fig['n']} min {low:.2f} median {mid:.2f} max {high:.2f} s")
    if cold and spare:
        print(f"spare / cold median: {spare / cold:.2f}")
    path = write_result("node_spare", {"example": args.example, "input": args.input, "figures": figures})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
