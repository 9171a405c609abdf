"""The naive loop: the same agent task and the same effect functions, but progress lives in memory and
there is no ledger. Kill it and restart it and it does the work again (the lesson of the durable
version). Run as a child process: `python -m checkpoint_tui.loop_worker.naive --home H --run R --steps N --pace P`.

With `--step-by-step` it waits for a line on stdin before each step (the app's lesson view): `next`
runs one step, `finish` runs the rest without waiting, end of input stops it. Each finished step is
announced on stdout as `naive RUN: step K done`; that count is all the process knows of its progress."""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from checkpoint_tui.ledger.effects import KINDS, EffectSpec, physical_for
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.loop_worker.payloads import PAYLOAD_BUILDERS
from checkpoint_tui.loop_worker.shared import EffectInput, timer_ms
from checkpoint_tui.loop_worker.tools import evaluate_arithmetic
from checkpoint_tui.model.offline import offline_decision
from checkpoint_tui.settings import load_settings

NEXT, FINISH = "next", "finish"


def naive_loop(home: Path, run_id: str, steps: int, pace: float, gate: Callable[[], bool] | None = None) -> None:
    """Run the task from step 1. `gate` is asked before each step: False stops the loop."""
    settings = load_settings(home)  # the ledger and artifacts root the parent handed on (env)
    conn = connect(settings.ledger)
    artifacts = settings.artifacts_dir
    completed: list[int] = []  # the only record of progress: gone with the process
    previous = None
    for step in range(1, steps + 1):
        if gate is not None and not gate():
            return
        decision, _tokens, _raw = offline_decision(run_id, step, steps, previous)
        tool = evaluate_arithmetic(decision.args["expression"]) if decision.action == "compute" else None
        inp = EffectInput(run_id, run_id, step, steps, decision, tool)
        for kind in KINDS:  # draft (file), note (db), send the email (outbox) — no claim, no stamp
            spec = EffectSpec(run_id, step, kind, PAYLOAD_BUILDERS[kind](inp), 1, os.getpid(), run_id)
            physical_for(kind, conn, artifacts, guarded=False)(spec, False)
        completed.append(step)  # "mark complete", in memory
        print(f"naive {run_id}: step {step} done", flush=True)
        previous = decision.args.get("text") or f"{decision.args.get('expression')} = {tool}"
        time.sleep(timer_ms(step, pace) / 1000)


class StdinGate:
    """Before each step: wait for `next` (one step) or `finish` (all the rest) on stdin; end of input
    (the parent closed the pipe or is gone) ends the loop."""

    def __init__(self) -> None:
        self.finishing = False

    def __call__(self) -> bool:
        while not self.finishing:
            line = sys.stdin.readline()
            if not line:
                return False
            word = line.strip()
            if word == FINISH:
                self.finishing = True
            elif word == NEXT:
                return True
        return True


def main() -> None:
    p = argparse.ArgumentParser(prog="checkpoint_tui.loop_worker.naive", description=__doc__)
    p.add_argument("--home", type=Path, required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--pace", type=float, default=0.3)
    p.add_argument("--step-by-step", action="store_true", help="wait for `next` / `finish` on stdin before each step")
    a = p.parse_args()
    naive_loop(a.home, a.run, a.steps, a.pace, StdinGate() if a.step_by_step else None)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
