"""The LangGraph mailer's worker: `python examples/agents/langgraph_mailer/worker.py` (any working
directory). Serves `LangGraphMailer` and `LangGraphMailerGuarded` on `CHECKPOINT_TASK_QUEUE` (default
`agents-example`) until SIGTERM; the environment it reads is in ../README.md."""

from __future__ import annotations

import sys
from pathlib import Path

# `python worker.py` puts this folder on sys.path; the examples share ../mailroom.py.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from temporalio.langgraph import LangGraphPlugin  # noqa: E402

from mailer_agent import GRAPHS  # noqa: E402
from mailroom import main  # noqa: E402
from workflows import LangGraphMailer, LangGraphMailerGuarded  # noqa: E402


def plugin() -> LangGraphPlugin:
    # The plugin makes each node an activity (`<graph>.<node>`) and registers them on the worker; it
    # wraps the graphs' nodes in place, so it is built once.
    return LangGraphPlugin(graphs=GRAPHS)


if __name__ == "__main__":
    main("langgraph_mailer", plugin, [LangGraphMailer, LangGraphMailerGuarded], [])
