"""`chaos --model-faults N`: N seeded model faults in a user's workflow's schedule, on the aimed activity
starts the other events leave free, from a random stream of their own (the seed's other events keep
their kinds). Each is armed at its start and meets the agent's next model requests:

| kind | what the requests meet |
|---|---|
| model-rate-limit | 1-4 requests: 429, Retry-After 0 or 1 s |
| model-error | 1-3 requests: 500 or 503 |
| model-slow | 1-2 requests: each piece 100, 200 or 400 ms late |
| model-cut | 1 request: the answer cut midway |
| model-garbage | 1 request: a tool call's arguments not JSON |

model-timeout is left to schedule files: what it costs is the agent's own timeout, which may be
minutes. A seeded fault that no request meets within ARMED_S is reported not fired, as any fault
is; with several --model-endpoint, each fault names one, drawn from the same stream."""

from __future__ import annotations

import random
from collections.abc import Sequence

from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.nemeses.model_faults import CUT, ERROR, GARBAGE, RATE_LIMIT, SLOW

SEEDED = (RATE_LIMIT, ERROR, SLOW, CUT, GARBAGE)
ARMED_S = 10.0  # a seeded fault waits this long for its requests (the schedule's next event waits too)


def model_fault_events(seed: int, n: int, free: Sequence[int], endpoints: Sequence[str]) -> list[ChaosEvent]:
    """`n` seeded model faults on steps drawn from `free` (the same seed, the same faults)."""
    rng = random.Random(f"model-faults-{seed}")
    events = []
    for step in sorted(rng.sample(sorted(free), n)):
        kind = rng.choice(SEEDED)
        opts: list[tuple[str, object]] = [("requests", _requests(kind, rng))]
        if kind == RATE_LIMIT:
            opts.append(("retry_after_s", rng.choice((0, 1))))
        elif kind == ERROR:
            opts.append(("status", rng.choice((500, 503))))
        elif kind == SLOW:
            opts.append(("piece_delay_ms", rng.choice((100, 200, 400))))
        if len(endpoints) > 1:
            opts.append(("endpoint", rng.choice(sorted(endpoints))))
        events.append(ChaosEvent(step, kind, 0, duration_s=ARMED_S, opts=tuple(opts)))
    return events


def _requests(kind: str, rng: random.Random) -> int:
    most = {RATE_LIMIT: 4, ERROR: 3, SLOW: 2}.get(kind, 1)
    return rng.randint(1, most)
