"""`chaos --until-covered [--max-kills N]`: after the seeded run, more runs whose kills are each aimed
at a window no death has landed in yet, until every one has at least one or the kill budget is
spent. What a workload is aimed at is its `Aims`: on our loop every window of core/windows.py
COVERAGE, timing aiming at the model call and the timer and the fault plan's hooks (a worker killing
itself at an exact point) at the tool call (tens of milliseconds) and the windows inside the effect
activity, which no timing can promise; on a user's workflow the windows its own seeded run showed
and timing can reach (proof/chaos/coverage_activities.py). Every kill is classified after the fact like
any other: an aimed kill that lands elsewhere counts where it landed, and the next round aims
again."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

from checkpoint_tui.core.windows import BEFORE_CLAIM, CLAIM_WRITE, COVERAGE, MODEL, STAMPED, TIMER, TOOL, WRITE_STAMP
from checkpoint_tui.ledger.effects import KINDS
from checkpoint_tui.proof.chaos import kill_windows
from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.report import Check
from checkpoint_tui.proof.report.chaos import ChaosReport, Coverage, CoverageRound

DEFAULT_MAX_KILLS = 30
MAX_ROUNDS = 8  # a window still missed after this many aimed rounds is reported, not chased forever


def aimed_event(window: str, step: int, rng: random.Random) -> ChaosEvent:
    """The event aimed at one window, at `step`."""
    if window == MODEL:
        return ChaosEvent(step, "worker-in-activity", rng.randrange(20, 120))
    if window == TIMER:
        return ChaosEvent(step, "worker-in-timer", rng.randrange(20, 100))
    hooks = {
        TOOL: "tool-call-crash",
        BEFORE_CLAIM: "before-claim-crash",
        CLAIM_WRITE: "claim-window-crash",
        WRITE_STAMP: "write-window-crash",
        STAMPED: "stamped-crash",
    }
    kind = hooks[window]
    effect = rng.choice(KINDS) if window in (CLAIM_WRITE, WRITE_STAMP) else None
    return ChaosEvent(step, kind, 0, effect)


def aimed_schedule(missing: list[str], seed: int, round_no: int, budget: int) -> tuple[list[ChaosEvent], int]:
    """(events, steps): one event per missing window (at most `budget`), every other step from step
    2, so the spare a kill leaves behind is ready before the next one."""
    rng = random.Random(f"coverage-{seed}-{round_no}")
    aims = missing[:budget]
    events = [aimed_event(w, 2 + 2 * i, rng) for i, w in enumerate(aims)]
    return events, 2 * len(aims) + 2


# (missing windows, seed, round number, kill budget) -> (the round's events, its steps)
Draw = Callable[[list[str], int, int, int], tuple[list[ChaosEvent], int]]


@dataclass(frozen=True)
class Aims:
    """What --until-covered aims at on one workload: the windows it must hit (`wanted`), how a round's
    schedule is drawn, and the windows the workload showed that no timing can reach ({window: why}:
    reported, not required)."""

    wanted: tuple[str, ...]
    draw: Draw
    unreachable: dict[str, str] = field(default_factory=dict)
    # the windows a later run's figures may show out of reach (a user's tasks and timers, timed from a
    # close); any other window stays wanted whatever a round shows
    recheck: frozenset[str] = frozenset()

    def missing(self, found: dict[str, int]) -> list[str]:
        return [w for w in self.wanted if not found.get(w)]


def ours() -> Aims:
    """Our loop: every coverage window, each reachable by timing or a fault hook."""
    return Aims(COVERAGE, aimed_schedule)


def merge(found: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    out = dict(found)
    for w, n in more.items():
        out[w] = out.get(w, 0) + n
    return kill_windows.counts([w for w, n in out.items() for _ in range(n)])


def coverage_check(found: dict[str, int], kills: int, max_kills: int, aims: Aims | None = None) -> Check:
    aims = aims or ours()
    missed = aims.missing(found)
    hit = ", ".join(f"{w} {found[w]}" for w in found)
    observed = f"{kills} worker deaths (bound {max_kills}); {hit}" + (
        f"; never hit: {', '.join(missed)}" if missed else ""
    )
    observed += f"; not reachable by timing here: {_lengths(aims.unreachable)}" if aims.unreachable else ""
    return Check("chaos: every window was hit (--until-covered)", not missed, observed, {"kills": kills})


def remeasured(aims: Aims, latest: Aims, round_no: int, missing: list[str]) -> Aims:
    """The aims after a round: a window not yet hit that the round's run showed, in enough tasks or timers
    (`latest.recheck`), too short for timing to reach is reported as such rather than aimed at again (the
    seeded run may have been timed on a loaded machine, its workflow tasks long, and a quieter round's
    18 ms ones are out of reach: six rounds missed one). An activity's own windows are never dropped: a
    round measures only the activities it did not kill, the aimed one's long write among them not. The
    kills stay timed by the seeded run: a round's run holds the tasks that waited out a dead worker's
    sticky queue, seconds after their close, and one that showed a window only at the activity it
    killed would leave nothing to aim with."""
    short = {
        w: f"{why} in round {round_no}" for w, why in latest.unreachable.items() if w in missing and w in latest.recheck
    }
    wanted = tuple(w for w in aims.wanted if w not in short)
    return Aims(wanted, aims.draw, {**aims.unreachable, **short}, aims.recheck)


def _lengths(unreachable: dict[str, str]) -> str:
    return ", ".join(f"{w} ({why})" for w, why in unreachable.items())


# One aimed round: (steps, events) -> that chaos run's report (proof/chaos/engine.py makes it a Chaos run).
Round = Callable[[int, list[ChaosEvent]], Awaitable[ChaosReport]]


async def cover(
    seed: int,
    report: ChaosReport,
    max_kills: int,
    run_round: Round,
    aims: Aims | None = None,
    again: Callable[[], Aims] | None = None,
) -> ChaosReport:
    """Aimed rounds after the seeded run: each a run of its own in the same home, its checks and kills
    added to the report, its windows merged into the report's. `again`: the aims as the round just run
    showed them (a user's workload, timed by what its runs show)."""
    aims = aims or ours()
    found, deaths = report.windows, list(report.kill_windows)
    rounds: list[CoverageRound] = []
    while (missed := aims.missing(found)) and len(deaths) < max_kills and len(rounds) < MAX_ROUNDS:
        events, steps = aims.draw(missed, seed, len(rounds) + 1, max_kills - len(deaths))
        if not events:  # nothing left to aim with (a window the seeded run showed nowhere a round can reach)
            break
        print(f"coverage round {len(rounds) + 1}: aiming at {', '.join(missed[: len(events)])}", flush=True)
        sub = await run_round(steps, events)
        deaths += sub.kill_windows
        found = merge(found, sub.windows)
        rounds.append(
            CoverageRound(
                run_id=sub.run_id, schedule=sub.schedule, windows=sub.windows, audit=sub.audit, wall_s=sub.wall_s
            )
        )
        report.checks += [replace(c, name=f"{c.name} (coverage round {len(rounds)})") for c in sub.checks]
        report.kills += sub.kills
        report.wall_s += sub.wall_s
        if again is not None:
            aims = remeasured(aims, again(), len(rounds), aims.missing(found))
    report.windows, report.kill_windows = found, deaths
    report.checks.append(coverage_check(found, len(deaths), max_kills, aims))
    report.coverage = Coverage(
        max_kills=max_kills,
        kills=len(deaths),
        rounds=rounds,
        wanted=list(aims.wanted),
        missing=aims.missing(found),
        unreachable=aims.unreachable,
    )
    return report


def print_coverage(report: ChaosReport) -> None:
    """After the aimed rounds: each round's verdict, the windows over all runs, the one verdict."""
    cov = report.coverage
    assert cov is not None  # cover() wrote it
    for i, rnd in enumerate(cov.rounds, 1):
        bad = [c.name for c in report.checks if c.name.endswith(f"(coverage round {i})") and not c.ok]
        lost, duplicated = (rnd.audit.lost, rnd.audit.duplicated) if rnd.audit is not None else (0, 0)
        print(
            f"  coverage round {i}: run {rnd.run_id} · LOST {lost} · DUPLICATED {duplicated} · "
            f"{'PASS' if not bad else 'FAIL ' + '; '.join(bad)}"
        )
    found = " · ".join(f"{w} {n}" for w, n in report.windows.items())
    print(f"windows over {cov.kills} worker deaths (bound {cov.max_kills}): {found}")
    print(f"aimed at: {', '.join(cov.wanted)}")
    if cov.unreachable:
        print(f"shown, but not reachable by timing here: {_lengths(cov.unreachable)}")
    if cov.missing:
        print(f"never hit: {', '.join(cov.missing)}")
    ok = all(c.ok for c in report.checks)
    print(f"wall {report.wall_s:.1f} s · verdict: {'PASS' if ok else 'FAIL'}")
