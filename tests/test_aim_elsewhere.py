"""At load the lead run can be done before its event comes (#52): the event is aimed at an activity in
flight in another run, the newest first, one the aim picks and on the lab's live worker; none in
flight, none (said as not fired, never guessed)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from checkpoint_tui.core.activity_history import ActivityExec
from checkpoint_tui.proof.chaos.workflow_target import ActivityTarget
from checkpoint_tui.settings import Settings


class FakeProgress:
    def __init__(self, run_id: str, acts: list[ActivityExec]) -> None:
        self.run_id, self.acts, self.refreshed = run_id, acts, 0

    async def refresh(self) -> None:
        self.refreshed += 1


def _act(seq: int, status: str, identity: str | None = "7@vm") -> ActivityExec:
    going = status == "running"
    return ActivityExec(
        seq,
        0,
        "exec",
        str(seq),
        "send_line",
        1.0,
        identity=identity,
        started_at=2.0,
        closed_at=None if going else 3.0,
        status=status,
    )


def _target(tmp_path: Path, runs: dict[str, list[ActivityExec]]) -> tuple[ActivityTarget, SimpleNamespace]:
    target = ActivityTarget(SimpleNamespace(), "SendLines", None, False, aim="any")
    target.runs = {r: FakeProgress(r, acts) for r, acts in runs.items()}  # type: ignore[misc]
    chaos = SimpleNamespace(settings=Settings(home=tmp_path), run_ids=list(runs))
    return target, chaos


def test_an_activity_in_flight_in_the_newest_run_is_picked(tmp_path: Path):
    target, chaos = _target(
        tmp_path,
        {
            "lead": [_act(1, "completed")],
            "older": [_act(1, "completed"), _act(2, "running")],
            "newest": [_act(1, "completed"), _act(2, "completed")],
        },
    )
    found = asyncio.run(target._elsewhere(chaos))  # noqa: SLF001
    assert found is not None and found[0].run_id == "older" and found[1].seq == 2


def test_nothing_in_flight_or_not_aimed_is_none(tmp_path: Path):
    target, chaos = _target(tmp_path, {"lead": [_act(1, "running")], "other": [_act(1, "completed")]})
    assert asyncio.run(target._elsewhere(chaos)) is None  # noqa: SLF001  (the lead's own is never "elsewhere")
    target, chaos = _target(tmp_path, {"lead": [], "other": [_act(1, "running")]})
    target.aim = "tool*"  # matches no send_line
    assert asyncio.run(target._elsewhere(chaos)) is None  # noqa: SLF001
