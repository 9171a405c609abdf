"""A small, configurable price table (USD per 1M tokens). Local servers cost 0.

Override or extend with CHECKPOINT_PRICE_TABLE='{"model-prefix": [input_per_mtok, output_per_mtok]}'."""

from __future__ import annotations

import contextlib
import json

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
}
LOCAL_HOSTS = ("127.", "localhost", "[::1]", "0.0.0.0")


def price_table(raw: str | None = None) -> dict[str, tuple[float, float]]:
    """The default table with `raw` (CHECKPOINT_PRICE_TABLE's JSON, via Settings) laid over it."""
    table = dict(DEFAULT_PRICES)
    if raw:
        # a bad override must not break a run; the default table stands
        with contextlib.suppress(ValueError, TypeError, IndexError, AttributeError):
            table.update({k: (float(v[0]), float(v[1])) for k, v in json.loads(raw).items()})
    return table


def cost_usd(host: str, model: str, prompt_tokens: int, completion_tokens: int, overrides: str | None = None) -> float:
    if host.startswith(LOCAL_HOSTS):
        return 0.0
    table = price_table(overrides)
    key = max((k for k in table if model.startswith(k)), key=len, default=None)
    if key is None:
        return 0.0
    pin, pout = table[key]
    return (prompt_tokens * pin + completion_tokens * pout) / 1_000_000
