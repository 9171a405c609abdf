"""Replay a finished run's recorded history against today's workflow code (a determinism check):
`python -m checkpoint_tui.engine.replay --address A --namespace N RUN_ID`. Exit 0 if it replays."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from temporalio.client import Client
from temporalio.worker import Replayer

from checkpoint_tui.engine.workflow import AgentLoop


async def replay(address: str, namespace: str, run_id: str) -> int:
    client = await Client.connect(address, namespace=namespace)
    history = await client.get_workflow_handle(run_id).fetch_history()
    result = await Replayer(workflows=[AgentLoop]).replay_workflow(history, raise_on_replay_failure=False)
    if result.replay_failure is not None:
        print(f"replay FAILED for {run_id}: {result.replay_failure}")
        return 1
    print(f"replayed {run_id}: {len(history.events)} events, no nondeterminism")
    return 0


def main() -> None:
    p = argparse.ArgumentParser(prog="checkpoint_tui.engine.replay", description=__doc__)
    p.add_argument("--address", required=True)
    p.add_argument("--namespace", default="default")
    p.add_argument("run_id")
    args = p.parse_args()
    code = asyncio.run(replay(args.address, args.namespace, args.run_id))
    sys.stdout.flush()
    os._exit(code)  # skip finalisation (native SDK threads), see engine/worker.py


if __name__ == "__main__":
    main()
