"""The agent's one tool: safe arithmetic (simpleeval with no names or functions; never eval)."""

from __future__ import annotations

import ast
import operator

from simpleeval import SimpleEval

MAX_EXPRESSION = 200
MAX_POWER = 1000


def _safe_pow(a: float, b: float) -> float:
    if abs(b) > MAX_POWER:
        raise ValueError(f"exponent {b} too large")
    return operator.pow(a, b)


_evaluator = SimpleEval(
    operators={
        ast.Add: operator.add,
        ast.Sub: operator.sub,
        ast.Mult: operator.mul,
        ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod,
        ast.Pow: _safe_pow,
        ast.USub: operator.neg,
        ast.UAdd: operator.pos,
    },
    functions={},
    names={},
)


_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop)


def _check_numbers_only(expression: str) -> None:
    """Reject strings, names and calls before evaluating (simpleeval alone allows "a"*10**9)."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"cannot parse {expression!r}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise ValueError(f"{expression!r} is not arithmetic")
        elif not isinstance(node, _ALLOWED_NODES):
            raise ValueError(f"{expression!r} is not arithmetic")


def evaluate_arithmetic(expression: str) -> str:
    """Evaluate `6*7`-style arithmetic; raises ValueError for anything else."""
    if len(expression) > MAX_EXPRESSION:
        raise ValueError("expression too long")
    _check_numbers_only(expression)
    try:
        value = _evaluator.eval(expression)
    except Exception as err:  # simpleeval raises many types; the caller wants one
        raise ValueError(f"cannot evaluate {expression!r}: {err}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{expression!r} is not arithmetic")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)
