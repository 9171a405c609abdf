"""The Deep Agents mailer's worker: `python examples/agents/deepagents_mailer/worker.py` (any working
directory). Serves `DeepAgentsMailer` and `DeepAgentsMailerGuarded` on `CHECKPOINT_TASK_QUEUE`
(default `agents-example`) until SIGTERM; the environment it reads is in ../README.md."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

# `python worker.py` puts this folder on sys.path; the examples share ../mailroom.py.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from temporalio.deepagents import DeepAgentsPlugin  # noqa: E402

from mailer_agent import provider  # noqa: E402
from mailroom import main  # noqa: E402
from workflows import DeepAgentsMailer, DeepAgentsMailerGuarded  # noqa: E402

# The plugin's default model timeout is 5 minutes (an unassisted kill would cost that): 10 s covers the
# longest think (5 s). No heartbeat timeout and the default retry policy, as the framework ships them.
MODEL_OPTIONS = {"start_to_close_timeout": timedelta(seconds=10)}


def plugin() -> DeepAgentsPlugin:
    # Registers the plugin's four activities (`deepagents.invoke_model`, `...invoke_model_streaming`,
    # `...invoke_tool`, `...backend_op`), its data converter and the sandbox passthrough; the model
    # activity builds the scripted model from its name through `provider`.
    return DeepAgentsPlugin(model_provider=provider, model_activity_options=MODEL_OPTIONS)


if __name__ == "__main__":
    main("deepagents_mailer", plugin, [DeepAgentsMailer, DeepAgentsMailerGuarded], [])
