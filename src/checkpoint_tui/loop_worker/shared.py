"""Names and dataclass inputs/outputs shared by the workflow, its activities and the starter.

One dataclass per activity input, so fields can be added without breaking recorded histories.
"""

# No `from __future__ import annotations` here: these dataclasses are Temporal payloads, and the
# converter evaluates their annotations on every decode (typing.get_type_hints); as objects rather
# than strings they decode in about half the time (`bench/payload_decode.py` prints both).

import re
from dataclasses import dataclass, field
from datetime import timedelta

from checkpoint_tui.model.decision import Decision

WORKFLOW_NAME = "AgentLoop"
UNTRUSTED_INPUT = "UntrustedInput"  # the failure type of workflow input a worker refuses (non-retryable)
# What core/runs.new_run_id makes: the only run ids a worker accepts (they name artifact folders).
RUN_ID_PATTERN = re.compile(r"run-\d{8}-\d{6}-[0-9a-f]{4}")
MAX_STEPS = 100_000  # a run's documented maximum (the CLI, the app and start_run all check it)
MAX_PACE = 100.0  # x the default pause; beyond it a step's timer runs into minutes
GUARDRAIL_ERROR = "GuardrailError"
ALLOW_STEPS_SIGNAL = "allow_steps"  # a step-through run (the app's lesson view) may run steps up to this number

HEARTBEAT_TIMEOUT = timedelta(seconds=2)
START_TO_CLOSE = timedelta(minutes=3)
RETRY_INITIAL = timedelta(milliseconds=100)
RETRY_BACKOFF = 2.0
RETRY_MAX_INTERVAL = timedelta(seconds=2)
RETRY_MAX_ATTEMPTS = 8
HEARTBEAT_EVERY_S = 0.4  # well under the 2 s timeout; the SDK throttles what reaches the server


@dataclass
class ModelRef:
    """Which model to ask. Never holds a key: the worker reads it from its own environment."""

    url: str | None = None
    model: str | None = None


@dataclass
class AgentInput:
    run_id: str
    total_steps: int
    pace: float = 1.0
    model: ModelRef = field(default_factory=ModelRef)
    # Activity timeouts are inputs (not constants) so bench/resume_latency.py can run a textbook
    # baseline (5 s heartbeat timeout, 1 s first retry) beside ours on the same server.
    heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT.total_seconds()
    retry_initial_s: float = RETRY_INITIAL.total_seconds()
    # Run mark_step_running / mark_step_completed as local activities (no server round trip each).
    local_bookkeeping: bool = False
    # Continue-as-new every `steps_per_run` steps: a replacement worker replays at most that many
    # steps of history (replay costs ~15-30 ms a step here), so failover stays fast on long runs.
    steps_per_run: int = 25
    start_step: int = 1
    previous_note: str | None = None
    # Step-through (the app's lesson view): None runs freely; a number holds the run before any later
    # step until an ALLOW_STEPS_SIGNAL raises it (carried across continue-as-new).
    allowed_steps: int | None = None


@dataclass
class StepInput:
    run_id: str
    step: int
    total_steps: int


@dataclass
class LlmInput:
    run_id: str
    step: int
    total_steps: int
    pace: float
    previous_note: str | None
    model: ModelRef = field(default_factory=ModelRef)


@dataclass
class LlmOutput:
    decision: Decision
    provider: str
    tokens: int
    cost_usd: float


@dataclass
class ToolInput:
    run_id: str
    step: int
    expression: str


@dataclass
class EffectInput:
    run_id: str
    workflow_id: str
    step: int
    total_steps: int
    decision: Decision
    tool_result: str | None


@dataclass
class FinishInput:
    run_id: str
    status: str
    error: str | None = None


@dataclass
class AgentResult:
    run_id: str
    completed_steps: int


def timer_ms(step: int, pace: float) -> float:
    """The pause after a step: derived from the step index so replays schedule identical timers."""
    return pace * (300 + (step * 137) % 501)


def think_ms(step: int, pace: float) -> float:
    """Simulated model latency of the offline provider (ms), derived from the step index."""
    return pace * (400 + (step * 71) % 400)
