"""The Strands mailer's worker: `python examples/agents/strands_mailer/worker.py` (any working directory).
Serves `StrandsMailer` and `StrandsMailerGuarded` on `CHECKPOINT_TASK_QUEUE` (default `agents-example`)
until SIGTERM; the environment it reads is in ../README.md."""

from __future__ import annotations

import sys
from pathlib import Path

# `python worker.py` puts this folder on sys.path; the examples share ../mailroom.py.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from temporalio.strands_agents import StrandsPlugin  # noqa: E402

from mailer_agent import MODEL_NAME, model  # noqa: E402
from mailroom import main  # noqa: E402
from tools import send_email, send_email_guarded  # noqa: E402
from workflows import StrandsMailer, StrandsMailerGuarded  # noqa: E402


def plugin() -> StrandsPlugin:
    # The plugin registers invoke_model (on the factory named here; TemporalAgent(model=) picks it),
    # the sandbox passthrough for strands and pydantic's payload converter.
    return StrandsPlugin(models={MODEL_NAME: model})


if __name__ == "__main__":
    main("strands_mailer", plugin, [StrandsMailer, StrandsMailerGuarded], [send_email, send_email_guarded])
