"""The Google ADK mailer's worker: `python examples/agents/google_adk_mailer/worker.py` (any working
directory). Serves `GoogleAdkMailer` and `GoogleAdkMailerGuarded` on `CHECKPOINT_TASK_QUEUE` (default
`agents-example`) until SIGTERM; the environment it reads is in ../README.md."""

from __future__ import annotations

import sys
from pathlib import Path

# `python worker.py` puts this folder on sys.path; the examples share ../mailroom.py.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from temporalio.google_adk import GoogleAdkPlugin  # noqa: E402

from mailer_agent import register  # noqa: E402
from mailroom import main  # noqa: E402
from tools import send_email, send_email_guarded  # noqa: E402
from workflows import GoogleAdkMailer, GoogleAdkMailerGuarded  # noqa: E402


def plugin() -> GoogleAdkPlugin:
    # The plugin registers invoke_model (which builds the model by name from ADK's registry: ours is
    # registered here), the sandbox passthrough for google.adk / google.genai, pydantic's payload
    # converter, and ADK's deterministic clock, ids and randomness inside workflows.
    register()
    return GoogleAdkPlugin()


if __name__ == "__main__":
    main("google_adk_mailer", plugin, [GoogleAdkMailer, GoogleAdkMailerGuarded], [send_email, send_email_guarded])
