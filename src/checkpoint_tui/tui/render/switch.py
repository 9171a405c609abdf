"""Which tricks are on: all of them, unless CHECKPOINT_TUI_STOCK names some (or `1` / `all`: every one).

Read once, when the TUI is imported. The tricks look their switch up each time they run (a set lookup),
so a test can flip one on a live app with monkeypatch on `OFF`."""

from __future__ import annotations

from checkpoint_tui.errors import UsageError
from checkpoint_tui.settings import TUI_STOCK_ENV, tui_stock_env

PAINTED_LINES = "painted-lines"
LIGHT_SCROLLBAR = "light-scrollbar"
SCROLL_UPDATE = "scroll-update"
TRICKS = (PAINTED_LINES, LIGHT_SCROLLBAR, SCROLL_UPDATE)
ALL = ("1", "all")


def parse(value: str) -> frozenset[str]:
    """The tricks a CHECKPOINT_TUI_STOCK value switches off; a name that is not a trick is a usage error
    (a typo would otherwise measure the tricks-on path under the wrong label)."""
    names = {name.strip().lower() for name in value.split(",") if name.strip()}
    if names & set(ALL):
        return frozenset(TRICKS)
    unknown = sorted(names - set(TRICKS) - {"0"})
    if unknown:
        raise UsageError(f"{TUI_STOCK_ENV}: no trick named {', '.join(unknown)} (known: {', '.join(TRICKS)}, or all)")
    return frozenset(names & set(TRICKS))


OFF: frozenset[str] = parse(tui_stock_env())


def on(trick: str) -> bool:
    """Whether `trick` runs (False: Textual's stock path runs instead)."""
    return trick not in OFF
