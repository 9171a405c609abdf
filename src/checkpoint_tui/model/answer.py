"""What a model call gives back, and the two ways it fails: the worker's side of the model layer,
without the HTTP client (httpx, with the command line it imports, is 60 ms of a worker's start that
the offline default never needs; model/openai_compat.py is imported on the first call to a server)."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoint_tui.model.decision import Decision


class ProviderUnavailable(Exception):
    """The server did not answer usefully; str() is the reason recorded on the step."""


class GuardrailFailure(Exception):
    def __init__(self, reason: str, raw: str) -> None:
        super().__init__(reason)
        self.raw = raw


@dataclass(frozen=True)
class Answer:
    decision: Decision
    provider: str  # host/model
    tokens: int
    cost_usd: float
    note: str  # how the answer was obtained: "json", "fenced", "reprompted; scan", "truncated; repaired", …
