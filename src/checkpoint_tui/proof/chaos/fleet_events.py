"""The game-day nemeses as schedule events (Temporal's pre-production testing guide): what each takes,
its defaults and bounds, checked when a schedule file is read (one line, exit 2, before anything
starts). They fire in proof/nemeses/fleet.py (the workers) and the dependency proxy.

    {"at_s": 3, "nemesis": "graceful-restart", "queue": "acts", "grace_s": 5}
    {"at_s": 3, "nemesis": "fleet-down", "duration_s": 10}                 (every queue; or "queue")
    {"at_s": 2, "nemesis": "churn", "duration_s": 20, "interval_s": 2, "fraction": 0.3}
    {"at_s": 4, "nemesis": "deploy", "queue": "wf", "rollback_after_s": 8}  (needs --deploy wf=CMD)
    {"at_s": 4, "nemesis": "deploy", "ramp_percent": 25, "ramp_s": 3}       (with --deployment: versioned)
    {"at_s": 2, "nemesis": "dependency", "dependency": "MAIL_API", "fault": "errors", "duration_s": 5}
    {"at_s": 1, "nemesis": "model-rate-limit", "requests": 3, "retry_after_s": 2}  (needs --model-endpoint)
    {"at_s": 1, "nemesis": "model-error", "duration_s": 10, "status": 503}
    (model-timeout, model-slow with piece_delay_ms, model-cut, model-garbage: for `requests` or `duration_s`)

A `queue` names one command's workers (default: every queue for fleet-down and churn, the workflow's
for graceful-restart and deploy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.nemeses.dependency import FAULTS
from checkpoint_tui.proof.nemeses.fleet import CHURN, DEPLOY, FLEET_DOWN, GRACEFUL
from checkpoint_tui.proof.nemeses.model_faults import ERROR, RATE_LIMIT, SLOW
from checkpoint_tui.proof.nemeses.model_faults import FAULTS as MODEL_KINDS

DEPENDENCY = "dependency"
FLEET_KINDS = (GRACEFUL, FLEET_DOWN, CHURN, DEPLOY)
KINDS = (*FLEET_KINDS, DEPENDENCY, *MODEL_KINDS)
TARGETS = {
    GRACEFUL: "worker",
    FLEET_DOWN: "fleet",
    CHURN: "fleet",
    DEPLOY: "fleet",
    DEPENDENCY: "dependency",
    **dict.fromkeys(MODEL_KINDS, "model"),
}
TIMED = (FLEET_DOWN, CHURN, DEPENDENCY, *MODEL_KINDS)  # they last duration_s (a model fault: or its requests)
MAX_S = 600.0
COUNTED_S = 60.0  # a model fault counted in requests, with no duration_s: at most this long
# name: (kinds that take it, default, low, high); a None default: optional (absent from the event)
PARAMS: dict[str, tuple[tuple[str, ...], object, float, float]] = {
    "grace_s": ((GRACEFUL, CHURN, DEPLOY), 10.0, 0.0, 300.0),  # SIGTERM, then SIGKILL after this (k8s' grace)
    "interval_s": ((CHURN,), 2.0, 0.1, MAX_S),
    "fraction": ((CHURN,), 0.3, 0.01, 1.0),  # of each queue's workers restarted per interval, at least one
    "rollback_after_s": ((DEPLOY,), None, 0.0, MAX_S),
    "ramp_percent": ((DEPLOY,), None, 0.0, 100.0),  # with --deployment: version 2 ramps first, this share
    "ramp_s": ((DEPLOY,), None, 0.0, MAX_S),  # for this long (default 2 s)
    "latency_ms": ((DEPENDENCY,), 500, 1, 60_000),
    "requests": (MODEL_KINDS, None, 1, 10_000),  # a model fault meets this many requests (within duration_s)
    "status": ((ERROR,), 503, 500, 503),
    "retry_after_s": ((RATE_LIMIT,), 1, 0, 3600),
    "piece_delay_ms": ((SLOW,), 200, 0, 60_000),
}
WHOLE = ("latency_ms", "requests", "status", "retry_after_s", "piece_delay_ms")  # numbers kept as ints
TEXT = {"queue": FLEET_KINDS, "dependency": (DEPENDENCY,), "fault": (DEPENDENCY,), "endpoint": MODEL_KINDS}


def opts_of(where: str, kind: str, raw: dict) -> tuple[tuple[str, object], ...]:
    """The event's own parameters, checked, with their defaults, in a fixed order."""
    out: list[tuple[str, object]] = []
    for name, (kinds, default, low, high) in PARAMS.items():
        if kind not in kinds:
            if name in raw:
                raise UsageError(f"{where}: {kind} takes no {name}")
            continue
        value = raw.get(name, default)
        if value is None:
            continue
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not low <= value <= high:
            raise UsageError(f"{where}: {name} must be a number in [{low:g}, {high:g}]")
        if name in WHOLE and value != int(value) or name == "status" and value not in (500, 503):
            raise UsageError(f"{where}: {name} must be a whole number" + (" (500 or 503)" if name == "status" else ""))
        out.append((name, int(value) if name in WHOLE else float(value)))
    for name, kinds in TEXT.items():
        if name not in raw:
            continue
        if kind not in kinds:
            raise UsageError(f"{where}: {kind} takes no {name}")
        value = raw[name]
        if not isinstance(value, str) or not 0 < len(value) <= 200:
            raise UsageError(f"{where}: {name} must be a name (a string of at most 200 characters)")
        out.append((name, value))
    if kind == DEPENDENCY:
        fault = dict(out).get("fault", "errors")
        if fault not in FAULTS:
            raise UsageError(f"{where}: fault must be one of {', '.join(FAULTS)}")
        out = [(k, v) for k, v in out if k != "fault"] + [("fault", fault)]
    return tuple(out)


def default_duration(kind: str, raw: dict) -> float:
    """A timed event's duration_s when the schedule gives none: a model fault counted in requests lasts
    until it met them, at most COUNTED_S (the schedule's next event waits for it), any other 1 s."""
    return COUNTED_S if kind in MODEL_KINDS and "requests" in raw else 1.0


def check_against(
    events: list, queues: list[str], deploys: list[str], dependencies: list[str], where: str, models: Sequence[str] = ()
) -> None:
    """Every queue, --deploy, --dependency and --model-endpoint an event names exists in this invocation
    (before chaos starts)."""
    for ev in events:
        opts = dict(ev.opts)
        queue = opts.get("queue")
        if queue is not None and queue not in queues:
            raise UsageError(f"{where}: {ev.kind} names queue {str(queue)[:60]!r}; the fleet polls {', '.join(queues)}")
        if ev.kind == DEPLOY and (queue or queues[0]) not in deploys:
            raise UsageError(
                f"{where}: deploy on {queue or queues[0]} needs --deploy {queue or queues[0]}=CMD "
                "(the new version of that worker command)"
            )
        if ev.kind == DEPENDENCY:
            name = opts.get("dependency") or (dependencies[0] if len(dependencies) == 1 else None)
            if name not in dependencies:
                given = ", ".join(dependencies) or "none given"
                raise UsageError(f"{where}: dependency {str(name)[:60]!r}: name one of --dependency ({given})")
        if ev.kind in MODEL_KINDS:
            name = opts.get("endpoint") or (models[0] if len(models) == 1 else None)
            if name not in models:
                given = ", ".join(models) or "none given"
                raise UsageError(f"{where}: {ev.kind} on {str(name)[:60]!r}: name one of --model-endpoint ({given})")


def describe(opts: tuple[tuple[str, object], ...]) -> str:
    """The event's parameters for the printed schedule."""
    return "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}" for k, v in opts)
