"""The fleet's workflow worker with version 2 of `FleetMailer` (workflows_v2.py), the release a deploy
swaps in: `python examples/fleet/workflow_worker_v2.py`. Everything else as workflow_worker.py."""

from __future__ import annotations

from workflow_worker import main
from workflows_v2 import FleetMailer

if __name__ == "__main__":
    main(FleetMailer, "v2")
