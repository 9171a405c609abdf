"""Graceful restarts with and without the server cancelling a shutting-down worker's polls (#54): the
dev server started twice, with and without `frontend.enableCancelWorkerPollsOnShutdown=true` (temporal
PR #9203; the SDK's side is the worker's ShutdownWorker call), and on each `gameday --scenarios
churn,graceful-restart` on examples/fleet, REPEAT times, as a server the lab did not start.

    .venv/bin/python bench/shutdown_polls.py [--repeat 10] [--runs 4]

Prints per setting: the experiments, the runs, the tasks lost to a shutdown (an activity or workflow
task that sat out its timeout: the audit's lost work, over every run) and the timeouts waited out.
Writes run/bench/shutdown_polls.json. Not to be run beside a test suite."""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import ROOT, write_result  # noqa: E402

TEMPORAL = ROOT / ".venv" / "bin" / "temporal"
FLAG = "frontend.enableCancelWorkerPollsOnShutdown=true"
FLEET = [
    *("--worker", f"gwf={sys.executable} {ROOT / 'examples' / 'fleet' / 'workflow_worker.py'}"),
    *("--worker", f"gacts={sys.executable} {ROOT / 'examples' / 'fleet' / 'activity_worker.py'}"),
]
INPUT = '{"count": 8, "pace": 0.5, "activity_queue": "gacts"}'


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(folder: Path, cancel_polls: bool) -> tuple[subprocess.Popen, str]:
    port = _port()
    cmd = [str(TEMPORAL), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port), "--headless"]
    cmd += ["--db-filename", str(folder / "temporal.db")] + (["--dynamic-config-value", FLAG] if cancel_polls else [])
    with open(folder / "server.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, f"127.0.0.1:{port}"
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("the dev server did not listen within 30 s")


def _losses(out: Path) -> list[dict]:
    """Per experiment: its runs, the tasks lost over every run, the timeouts waited out."""
    found = []
    for exp in json.loads((out / "gameday.json").read_text())["experiments"]:
        report = exp["report"]
        audits = [r["audit"] for r in report.get("runs") or []] or [report["audit"]]
        found.append(
            {
                "scenario": exp.get("name") or exp.get("scenario"),
                "held": exp.get("held"),
                "runs": len(audits),
                "lost": sum(a.get("lost_work_count") or 0 for a in audits),
                "timeouts": sum((a.get("lost_work") or {}).get("timeouts_total") or 0 for a in audits),
                # what did not hold, in the report's words (a check that failed)
                "failed": list(
                    dict.fromkeys(  # the experiment's checks include its chaos report's: each once
                        f"{c.get('name')}: {str(c.get('observed'))[:300]}"
                        for c in [*exp.get("checks", []), *report["checks"]]
                        if not c["ok"]
                    )
                ),
            }
        )
    return found


def one_setting(cancel_polls: bool, repeat: int, runs: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="shutdown-polls-"))
    server, address = _server(folder, cancel_polls)
    experiments: list[dict] = []
    try:
        for i in range(repeat):
            home, out = folder / f"h{i}", folder / f"gd{i}"
            lab = [sys.executable, "-m", "checkpoint_tui", "--home", str(home), "--temporal-address", address, *FLEET]
            day = ["gameday", "--workflow", "FleetMailer", "--input", INPUT, "--runs", str(runs)]
            day += ["--scenarios", "churn,graceful-restart", "--seed", str(i + 1), "--out", str(out)]
            subprocess.run([*lab, *day], capture_output=True, text=True, timeout=600, cwd=ROOT)
            subprocess.run([*lab, "stop"], capture_output=True, timeout=120, cwd=ROOT)
            if (out / "gameday.json").is_file():
                experiments += _losses(out)
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(folder, ignore_errors=True)
    total_runs = sum(e["runs"] for e in experiments)
    lost = sum(e["lost"] for e in experiments)
    return {
        "cancel_polls_on_shutdown": cancel_polls,
        "experiments": len(experiments),
        "held": sum(bool(e["held"]) for e in experiments),
        "runs": total_runs,
        "tasks_lost": lost,
        "timeouts_waited_out": sum(e["timeouts"] for e in experiments),
        "per_experiment": experiments,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--runs", type=int, default=4)
    p.add_argument("--settings", default="off,on", help="which of the two: off (stock), on (polls cancelled)")
    args = p.parse_args()
    results = []
    for cancel in [s.strip() == "on" for s in args.settings.split(",") if s.strip() in ("off", "on")]:
        r = one_setting(cancel, args.repeat, args.runs)
        results.append(r)
        flag = "with" if cancel else "without"
        print(
            f"{flag} {FLAG.split('=')[0]}: {r['held']}/{r['experiments']} experiments held, {r['runs']} runs, "
            f"tasks lost {r['tasks_lost']}, timeouts waited out {r['timeouts_waited_out']}",
            flush=True,
        )
    print(f"wrote {write_result('shutdown_polls', {'results': results})}")


if __name__ == "__main__":
    main()
