"""A model fault's endpoint from the model clients' own base-URL variables: where no --model-endpoint is
given and a fault of the agent's model is asked for (a schedule's model-* events, --model-faults,
gameday's model-outage), OPENAI_BASE_URL and ANTHROPIC_BASE_URL set in the lab's environment (the
openai and anthropic SDKs read them, and so the frameworks built on them) count as given, each checked
as the flag's value is."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from checkpoint_tui.errors import UsageError
from checkpoint_tui.settings import Settings

if TYPE_CHECKING:
    from checkpoint_tui.proof.chaos.schedule import ChaosEvent

BASE_URL_VARIABLES = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")


def for_events(settings: Settings, events: Iterable[ChaosEvent]) -> Settings:
    """The settings for a schedule: with the environment's model endpoints if a model fault is in it."""
    from checkpoint_tui.proof.nemeses.model_faults import FAULTS

    return endpoints_from_environment(settings) if any(e.kind in FAULTS for e in events) else settings


def endpoints_from_environment(settings: Settings, environ: Mapping[str, str] = os.environ) -> Settings:
    """The settings with the environment's model endpoints, when no --model-endpoint was given;
    unchanged otherwise. A value that is not one is exit 2, its URL unsaid."""
    from checkpoint_tui.proof.nemeses.model_faults import parse_endpoint

    if settings.model_endpoints:
        return settings
    found = []
    for name in BASE_URL_VARIABLES:
        if value := environ.get(name):
            try:
                found.append(parse_endpoint(f"{name}={value}"))
            except ValueError as err:
                raise UsageError(f"{err} (from the environment's {name})") from None
    return replace(settings, model_endpoints=tuple(found)) if found else settings
