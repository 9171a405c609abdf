"""The agent's one tool: safe arithmetic (simpleeval with no names or functions; never eval).

The expression comes from a model, so the work is bounded before it is done: big-integer arithmetic
runs in C without releasing the GIL, and a thread or a timeout cannot interrupt it. A power or a
product whose result would exceed MAX_RESULT_BITS is refused from its operands' sizes alone (every
other operator keeps results within a bit of its operands), so any accepted expression finishes in
microseconds. `run_tool` still evaluates in a thread under a time limit, so heartbeats go on.
"""

from __future__ import annotations

import ast
import asyncio
import math
import operator

from simpleeval import SimpleEval

MAX_EXPRESSION = 200  # characters
MAX_RESULT_BITS = 10_000  # about 3,000 decimal digits: below Python's 4,300-digit str() limit
TIME_LIMIT_S = 1.0


def _pow_bits(a: int, b: int) -> float:
    return b if b > MAX_RESULT_BITS else b * math.log2(abs(a))  # b alone is a bound: no float overflow


def _safe_pow(a: complex, b: complex) -> complex:
    # |a|**b has b * log2|a| bits (and at least b): refuse before computing; 0, 1 and -1 stay small
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and _pow_bits(a, b) > MAX_RESULT_BITS:
        raise ValueError(f"power too large (over {MAX_RESULT_BITS} bits)")
    return operator.pow(a, b)


def _safe_mul(a: complex, b: complex) -> complex:
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_RESULT_BITS:
        raise ValueError(f"product too large (over {MAX_RESULT_BITS} bits)")
    return operator.mul(a, b)


OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _safe_mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _safe_pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)


def _check_numbers_only(expression: str) -> None:
    """Reject strings, names and calls before evaluating (simpleeval alone allows "a"*10**9)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a NUL in the source
        raise ValueError(f"cannot parse {expression!r}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise ValueError(f"{expression!r} is not arithmetic")
        elif not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"{expression!r} is not arithmetic")


def evaluate_arithmetic(expression: str) -> str:
    """Evaluate `6*7`-style arithmetic; raises ValueError for anything else."""
    if not isinstance(expression, str):
        raise ValueError("the expression is not text")
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"expression too long (over {MAX_EXPRESSION} characters)")
    _check_numbers_only(expression)
    try:
        # one evaluator per call: SimpleEval keeps the expression on itself, and calls run in threads
        value = SimpleEval(operators=OPERATORS, functions={}, names={}).eval(expression)
    except Exception as err:  # our bounds, simpleeval and arithmetic raise many types; the caller wants one
        raise ValueError(f"cannot evaluate {expression!r}: {err}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{expression!r} is not arithmetic")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


async def run_tool(expression: str, limit_s: float = TIME_LIMIT_S) -> str:
    """The tool's result as the agent sees it: the value or `error: ...`, never an exception. It runs
    in a thread under `limit_s` so the event loop (heartbeats, other activities) never waits on it."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(evaluate_arithmetic, expression), limit_s)
    except ValueError as err:
        return f"error: {err}"
    except TimeoutError:
        return f"error: gave up after {limit_s:g} s"
