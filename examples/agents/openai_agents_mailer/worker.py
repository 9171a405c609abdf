"""The OpenAI Agents SDK mailer's worker: `python examples/agents/openai_agents_mailer/worker.py` (any
working directory). Serves `OpenAIMailer` and `OpenAIMailerGuarded` on `CHECKPOINT_TASK_QUEUE`
(default `agents-example`) until SIGTERM; the environment it reads is in ../README.md."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# `python worker.py` puts this folder on sys.path; the two examples share ../mailroom.py.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from temporalio.openai_agents import OpenAIAgentsPlugin  # noqa: E402

from mailer_agent import ScriptedProvider  # noqa: E402
from mailroom import main  # noqa: E402
from tools import send_email, send_email_guarded  # noqa: E402
from workflows import OpenAIMailer, OpenAIMailerGuarded  # noqa: E402


def plugin() -> OpenAIAgentsPlugin:
    # The plugin registers invoke_model_activity (on the scripted model) and the payload converter. With
    # OPENAI_BASE_URL set, the model is an OpenAI-compatible server over HTTP (../scripted_model.py
    # plays the same script), through Chat Completions, where a model fault can be put in between.
    base = os.environ.get("OPENAI_BASE_URL")
    if not base:
        return OpenAIAgentsPlugin(model_provider=ScriptedProvider())
    from agents import OpenAIProvider
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base, api_key=os.environ.get("OPENAI_API_KEY") or "unused-by-the-scripted-model")
    return OpenAIAgentsPlugin(model_provider=OpenAIProvider(openai_client=client, use_responses=False))


if __name__ == "__main__":
    main("openai_agents_mailer", plugin, [OpenAIMailer, OpenAIMailerGuarded], [send_email, send_email_guarded])
