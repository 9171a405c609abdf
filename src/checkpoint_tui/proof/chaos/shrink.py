"""`checkpoint-tui chaos --shrink FILE`: the smallest sub-schedule of a failing chaos schedule that
still fails, by delta debugging (Zeller's ddmin): try halves, then complements, then finer splits,
rerunning each candidate for real. The result is written beside FILE as `<name>.min.json`; it is
1-minimal (removing any one of its events makes it pass), not necessarily the global minimum.

Each rerun is a fresh run of the same steps on the same home; a schedule whose failure depends on
timing may pass on a rerun, and then shrinking keeps the larger schedule (it never guesses). An event
placed by time (`at_s`) keeps its time in every subset, though without the events before it the run
may be at another step by then."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from checkpoint_tui.errors import Failed
from checkpoint_tui.files import check_output_path
from checkpoint_tui.ops.temporal import reach
from checkpoint_tui.proof.chaos.command import run_schedule
from checkpoint_tui.proof.chaos.schedule import ChaosEvent, load_schedule, save_schedule
from checkpoint_tui.proof.chaos.targets import ChaosTarget
from checkpoint_tui.settings import Settings

T = TypeVar("T")


async def ddmin(items: Sequence[T], fails: Callable[[list[T]], Awaitable[bool]]) -> list[T]:
    """A 1-minimal failing subsequence of `items` (which must fail), order kept. `fails` is asked each
    distinct candidate at most once."""
    seen: dict[tuple[int, ...], bool] = {}
    current, n = list(range(len(items))), 2

    async def test(idx: list[int]) -> bool:
        key = tuple(idx)
        if key not in seen:
            seen[key] = await fails([items[i] for i in idx])
        return seen[key]

    while len(current) >= 2:
        chunks = [current[i * len(current) // n : (i + 1) * len(current) // n] for i in range(n)]
        reduced = None
        for chunk in chunks:
            if await test(chunk):
                reduced, n = chunk, 2
                break
        if reduced is None and n > 2:
            for i in range(n):
                comp = [x for j, c in enumerate(chunks) if j != i for x in c]
                if await test(comp):
                    reduced, n = comp, max(n - 1, 2)
                    break
        if reduced is not None:
            current = reduced
        elif n >= len(current):
            break
        else:
            n = min(len(current), 2 * n)
    return [items[i] for i in current]


def shrunk_path(schedule_file: Path) -> Path:
    """Where the smallest failing schedule is written: FILE.min.json beside FILE."""
    return schedule_file.with_name(schedule_file.name.removesuffix(".json") + ".min.json")


async def shrink_command(
    settings: Settings, schedule_file: Path, make_target: Callable[[], ChaosTarget], steps: int | None = None
) -> int:
    """Exit 0 with `<FILE>.min.json` written if the schedule fails; 1 if it passes (nothing to shrink).
    Each rerun runs against a fresh target of the workload (`make_target`)."""
    events, total, seed = load_schedule(schedule_file, steps)
    out = check_output_path(shrunk_path(schedule_file), "the shrunk schedule")  # before any run, not after them
    settings.ensure_dirs()
    await reach(settings)
    runs = 0

    async def fails(candidate: list[ChaosEvent]) -> bool:
        nonlocal runs
        runs += 1
        try:
            audit = (await run_schedule(settings, seed, total, candidate, make_target())).audit
            ok = audit is not None and audit.ok is True
        except Failed as err:  # the run stopped making progress: that is a failure too
            print(f"  ({err})", flush=True)
            ok = False
        print(f"shrink: run {runs}: {len(candidate)} event(s) -> {'pass' if ok else 'FAIL'}", flush=True)
        return not ok

    if not await fails(events):
        print(f"shrink: {schedule_file} passes; nothing to shrink")
        return 1
    smallest = await ddmin(events, fails)
    save_schedule(out, smallest, total, seed, "the shrunk schedule")
    print(f"shrink: {len(events)} -> {len(smallest)} event(s) in {runs} runs; still failing:")
    for ev in smallest:
        print(f"  {ev.describe()}")
    print(f"wrote {out}")
    return 0
