"""The scenarios of Temporal's "Pre-production testing" guide (Best Practices), each one variable at a
time, as chaos schedules of the game-day nemeses (proof/chaos/fleet_events.py) against the user's
fleet. What each breaks and what the guide says to watch is printed in the after-action report.

Every schedule is placed by time (`at_s` after the first run started), so it is the same whatever the
workflow does; the seed only names the runs (the nemeses here draw nothing at random).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from checkpoint_tui.errors import UsageError
from checkpoint_tui.proof.chaos.fleet_events import CHURN, DEPENDENCY, DEPLOY, FLEET_DOWN, GRACEFUL
from checkpoint_tui.proof.chaos.schedule import PARTITION, ChaosEvent
from checkpoint_tui.proof.nemeses.model_faults import CUT, ERROR, GARBAGE, RATE_LIMIT
from checkpoint_tui.settings import Settings


@dataclass(frozen=True)
class Scenario:
    name: str
    guide: str  # the guide's own words for it
    watch: str  # what the guide says to watch
    events: list[ChaosEvent] = field(default_factory=list)
    runs: int = 0  # 0: --runs; load starts more
    rate: float | None = None  # runs started per second (load)
    skipped: str | None = None  # why it cannot run against this fleet


NAMES = ("kill-all", "graceful-restart", "churn", "deploy", "dependency", "model-outage", "partition", "load")


def _at(at_s: float, kind: str, duration_s: float | None = None, **opts: object) -> ChaosEvent:
    order = (
        *("queue", "grace_s", "interval_s", "fraction", "rollback_after_s", "latency_ms", "dependency", "fault"),
        *("requests", "status", "retry_after_s", "endpoint", "ramp_percent", "ramp_s"),
    )
    return ChaosEvent(
        None,
        kind,
        0,
        duration_s=duration_s,
        at_s=at_s,
        opts=tuple((k, opts[k]) for k in order if opts.get(k) is not None),
    )


def _deploy(settings: Settings, queue: str | None, grace_s: float) -> Scenario:
    """A rolling deploy and rollback; with --deployment, a versioned one (blue-green: version 2 ramped to
    half of the new and auto-upgrade workflows for 2 s, then current; version 1 current again 6 s later)."""
    if settings.deployment:
        return Scenario(
            "deploy",
            "Deploy a Workflow change with Worker Versioning (ramp, then current), then roll back",
            "workflow task failures and the version behind them, how long runs were stuck, backlog drain",
            [_at(2.0, DEPLOY, queue=queue, ramp_percent=50.0, ramp_s=2.0, rollback_after_s=6.0)],
        )
    return Scenario(
        "deploy",
        "Deploy a Workflow change that breaks determinism, then roll back",
        "workflow task failures and their reason, how long runs were stuck, backlog drain",
        [_at(2.0, DEPLOY, queue=queue, grace_s=grace_s, rollback_after_s=6.0)] if queue else [],
        skipped=None if queue else "no --deploy QUEUE=CMD (the new version to deploy)",
    )


def plan(settings: Settings, names: list[str], runs: int, down_s: float, grace_s: float) -> list[Scenario]:
    """The scenarios asked for (default all), in the guide's order, each with its schedule; one that
    this fleet cannot run (no --deploy, no --dependency) is kept with the reason it is skipped."""
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise UsageError(f"--scenarios: {', '.join(unknown)} unknown; the scenarios are {', '.join(NAMES)}")
    queues = list(dict.fromkeys(m.queue for m in settings.members)) or [settings.task_queue]
    restarts = [_at(1.0 + 1.5 * i, GRACEFUL, queue=queues[i % len(queues)], grace_s=grace_s) for i in range(4)]
    deploy = settings.deploys[0].queue if settings.deploys else None
    deps = [name for name, _ in settings.dependencies]
    every = {
        "kill-all": Scenario(
            "kill-all",
            "Kill all Workers, then restart them",
            "duplicates, workflow failures, backlog growth and how long it takes to drain",
            [_at(2.0, FLEET_DOWN, down_s)],
        ),
        "graceful-restart": Scenario(
            "graceful-restart",
            "Roll out new Workers (SIGTERM and graceful shutdown)",
            "tasks lost to the shutdown (sat out their timeout), workflow failures",
            restarts,
        ),
        "churn": Scenario(
            "churn",
            "Restart 20-30% of the Worker fleet at an interval",
            "replay latency, invalidated sticky queues, lost tasks",
            [_at(1.0, CHURN, 8.0, grace_s=grace_s, interval_s=2.0, fraction=0.3)],
        ),
        "deploy": _deploy(settings, deploy, grace_s),
        "dependency": _dependency(deps),
        "model-outage": _model_outage([name for name, _ in settings.model_endpoints]),
        "partition": Scenario(
            "partition",
            "Remove network connectivity between Workers and Temporal",
            "workflows resume without manual intervention once it heals",
            [_at(2.0, PARTITION, 4.0)],
        ),
        "load": Scenario(
            "load",
            "Load past what the fleet serves at once",
            "schedule-to-start latency, backlog growth and drain",
            [],
            runs=runs * 4,
            rate=4.0,
        ),
    }
    return [every[n] for n in (names or NAMES)]


def _dependency(deps: list[str]) -> Scenario:
    """Errors, then latency, then a black hole, on the first --dependency (skipped without one)."""
    return Scenario(
        "dependency",
        "Break the things Workflows call (errors, high latency, a black hole)",
        "activity retries, heartbeats, non-idempotent activities, livelocks",
        [
            _at(1.0, DEPENDENCY, 3.0, dependency=deps[0], fault="errors"),
            _at(5.0, DEPENDENCY, 3.0, dependency=deps[0], fault="latency", latency_ms=1500),
            _at(9.0, DEPENDENCY, 3.0, dependency=deps[0], fault="blackhole"),
        ]
        if deps
        else [],
        skipped=None if deps else "no --dependency NAME=HOST:PORT (a service they call)",
    )


def _model_outage(endpoints: list[str]) -> Scenario:
    """The model provider's bad day on the first --model-endpoint: 4 s of 429s, 3 s of 503s, two answers
    cut midway, one tool call garbled (skipped without an endpoint). docs/model-faults.md."""
    name = endpoints[0] if endpoints else None
    return Scenario(
        "model-outage",
        "The model provider fails: rate limits, an outage, broken answers",
        "the framework's and Temporal's retries, model requests re-run and tokens paid again, tools run again",
        [
            _at(1.0, RATE_LIMIT, 4.0, retry_after_s=1, endpoint=name),
            _at(6.0, ERROR, 3.0, status=503, endpoint=name),
            _at(10.0, CUT, 3.0, requests=2, endpoint=name),
            _at(14.0, GARBAGE, 3.0, requests=1, endpoint=name),
        ]
        if name
        else [],
        skipped=None if name else "no --model-endpoint NAME=URL (the agent's model endpoint)",
    )
