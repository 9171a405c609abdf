"""The arithmetic tool: ordinary answers, and hostile expressions refused quickly (never computed)."""

from __future__ import annotations

import asyncio
import time

import pytest

from checkpoint_tui.loop_worker import tools
from checkpoint_tui.loop_worker.tools import MAX_RESULT_BITS, evaluate_arithmetic, run_tool

BOMBS = [
    "((9**999)**999)**999",  # each power passes an exponent-only check; the last one never finishes
    "9**99999",
    "9**9**9",
    "(10**5000)*(10**5000)*(10**5000)",
    "(10**3000)*(10**3000)",  # each factor is allowed, the product is not
    "-(7**3000)*(7**3000)",
]


@pytest.mark.parametrize(
    "expression, value",
    [
        ("6*7", "42"),
        ("2**10", "1024"),
        ("7/2", "3.5"),
        ("2**-2", "0.25"),
        ("1**99999", "1"),
        ("(-1)**99999", "-1"),
        ("0**99999", "0"),
        ("17 % 5 + 9 // 2", "6"),
        ("2**9999 - 2**9999", "0"),  # just under the bound
        ("1e308*10", "inf"),
    ],
)
def test_ordinary_arithmetic(expression, value):
    assert evaluate_arithmetic(expression) == value


@pytest.mark.parametrize("expression", BOMBS)
async def test_bombs_are_refused_quickly(expression):
    """Refused before the work: at most 0.5 s of this process's CPU (the evaluation runs in its thread);
    wall time only bounds a hang, since beside other labs on two cores 0.73 s of wall was seen for a
    refusal that takes milliseconds alone."""
    cpu, wall = time.process_time(), time.monotonic()
    result = await run_tool(expression)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    assert result.startswith("error: ") and "too large" in result, result
    assert cpu < 0.5 and wall < 5.0, f"{expression} took {cpu:.2f} s of CPU, {wall:.2f} s of wall time"


@pytest.mark.parametrize(
    "expression",
    ["a", "'x'*10", "__import__('os')", "[1]*9", "1 if 1 else 2", "1 << 99999", "6*\x007", "(" * 200, "1/0", "9" * 201],
)
async def test_anything_else_is_an_error_string(expression):
    result = await run_tool(expression)
    assert result.startswith("error: "), result


async def test_not_text_is_an_error_string():
    assert (await run_tool(None)).startswith("error: ")  # type: ignore[arg-type]


def test_every_accepted_result_prints():
    """The largest results the bounds allow still fit Python's int-to-str limit (4,300 digits)."""
    assert len(evaluate_arithmetic(f"2**{MAX_RESULT_BITS - 1}")) > 3000
    assert len(evaluate_arithmetic(f"(2**{MAX_RESULT_BITS // 2 - 1})*(2**{MAX_RESULT_BITS // 2 - 1})")) > 3000


async def test_time_limit_keeps_the_loop_free(monkeypatch):
    """A slow evaluation (none is, within the bounds: this one is simulated) ends in an error string at
    the limit, and the event loop keeps running meanwhile (heartbeats live there)."""

    def slow(expression: str) -> str:
        time.sleep(0.6)
        return "42"

    monkeypatch.setattr(tools, "evaluate_arithmetic", slow)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    task = asyncio.create_task(ticker())
    t = time.monotonic()
    result = await run_tool("6*7", limit_s=0.2)
    elapsed = time.monotonic() - t
    task.cancel()
    assert result == "error: gave up after 0.2 s"
    assert elapsed < 0.5 and ticks >= 5
