"""The pydantic-ai mailer's worker: `python examples/agents/pydantic_ai_mailer/worker.py` (any working
directory). Serves `PydanticMailer` and `PydanticMailerGuarded` on `CHECKPOINT_TASK_QUEUE` (default
`agents-example`) until SIGTERM; the environment it reads is in ../README.md."""

from __future__ import annotations

import sys
from pathlib import Path

# `python worker.py` puts this folder on sys.path; the two examples share ../mailroom.py.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin  # noqa: E402

from mailroom import main  # noqa: E402
from workflows import PydanticMailer, PydanticMailerGuarded  # noqa: E402

if __name__ == "__main__":
    # The plugin registers each listed agent's activities (model requests, tool calls) on the worker.
    main("pydantic_ai_mailer", PydanticAIPlugin, [PydanticMailer, PydanticMailerGuarded], [])
