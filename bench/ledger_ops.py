"""The ledger's own cost per agent step, without Temporal: the writes the activities of one step make
(the activity log and step row for each activity, the fault-plan reads, three exactly-once effects
with their physical writes), on SQLite and, with --ledger, on PostgreSQL.

    .venv/bin/python bench/ledger_ops.py [--steps 300] [--repeats 5] [--ledger postgresql://...]

Prints ms per step (median of --repeats) for each backend."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_result  # noqa: E402
from checkpoint_tui.ledger import faults  # noqa: E402
from checkpoint_tui.ledger.effects import KINDS, EffectSpec, apply_effect_once, physical_for  # noqa: E402
from checkpoint_tui.ledger.store import (  # noqa: E402
    close_all,
    connect,
    create_run,
    finish_run,
    now,
    touch_step,
    upsert_step,
)

ACTIVITIES = ("mark_step_running", "llm", "tool", "effect", "mark_step_completed")
HOOKED = ("llm", "tool", "effect")  # the activities with fault hooks read the plan with their touch


def one_step(conn, artifacts: Path, run_id: str, step: int) -> None:
    pid = os.getpid()
    for name in ACTIVITIES:  # what AgentActivities._touch writes for each activity (and reads, for three)
        if name in HOOKED:
            faults.touch_step_planned(conn, run_id, step, name, 1, pid, "running")
        else:
            touch_step(conn, run_id, step, name, 1, pid, "running")
    for kind in KINDS:
        spec = EffectSpec(run_id, step, kind, f"payload {step} {kind}", 1, pid, run_id)
        apply_effect_once(conn, spec, physical_for(kind, conn, artifacts))
    upsert_step(conn, run_id, step, "completed", attempt=1, worker_pid=pid, ended_at=now())


def cost_per_step(target: str, artifacts: Path, steps: int, label: str) -> tuple[float, float]:
    """(wall, CPU) ms per step of `steps` steps' ledger writes in this process. The CPU is this
    process's own (SQLite's engine runs in it; a PostgreSQL server's does not)."""
    conn = connect(target)
    run_id = f"bench-{label}-{time.monotonic_ns()}"
    create_run(conn, run_id, steps, 0.0, "offline", "bench")
    t, cpu = time.perf_counter(), time.process_time()
    for step in range(1, steps + 1):
        one_step(conn, artifacts, run_id, step)
    wall, cpu = (time.perf_counter() - t) * 1000 / steps, (time.process_time() - cpu) * 1000 / steps
    finish_run(conn, run_id, "completed")  # a shared ledger's readers of running runs pass it by
    return wall, cpu


def ms_per_step(target: str, artifacts: Path, steps: int, label: str) -> float:
    return cost_per_step(target, artifacts, steps, label)[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--ledger", help="also measure this PostgreSQL ledger")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ckpt-ledger-bench-"))
    targets = {"sqlite": str(work / "checkpoint.db")}
    if args.ledger:
        targets["postgresql"] = args.ledger
    runs: dict[str, list[float]] = {k: [] for k in targets}
    try:
        for _ in range(args.repeats):  # interleaved, so machine noise hits both alike
            for label, target in targets.items():
                runs[label].append(ms_per_step(target, work / "artifacts", args.steps, label))
    finally:
        close_all()
        shutil.rmtree(work, ignore_errors=True)  # the SQLite ledger and the effects' files of every run
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(f"{'ledger':<12} {'ms/step (median)':>16}   runs")
    for k, v in med.items():
        print(f"{k:<12} {v:>16.2f}   {', '.join(f'{x:.2f}' for x in runs[k])}")
    path = write_result(
        "ledger_ops",
        {"args": {**vars(args), "ledger": bool(args.ledger)}, "ms_per_step": runs, "median_ms_per_step": med},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
