"""The counts line at the top of a pane. Counts change every refresh; kept out of the pane's border
title (a title change repaints the whole bordered pane), a changed count repaints this line only."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.text import Text
from textual.containers import Vertical

from checkpoint_tui.tui.panes.text_lines import TextLines

COUNTS_EVERY_S = 1.0


class PaneInfo(TextLines):
    DEFAULT_CSS = """
    PaneInfo { height: 1; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, *, lines: int = 1, **kwargs) -> None:
        super().__init__(**kwargs)
        self.styles.height = lines
        self._shown: Text | None = None
        self._shown_at = 0.0

    def show(self, text: Text | str | Callable[[], Text | str], now: bool = False) -> None:
        """Counts repaint at most once every COUNTS_EVERY_S unless `now` (panes call this on every
        refresh, so a count held back is shown on a later one). `text` may be a function that makes
        it: a held-back count is then not even built."""
        at = time.monotonic()
        if not now and at - self._shown_at < COUNTS_EVERY_S:
            return
        made = text() if callable(text) else text
        made = made if isinstance(made, Text) else Text(made)
        if made == self._shown:  # the same text again would still cost a repaint
            return
        self._shown, self._shown_at = made, at
        self.set_text(made)  # fixed height: a repaint of these lines, no layout pass

    def expire(self) -> None:
        """The next show() repaints at once (another run: its counts are news)."""
        self._shown_at = 0.0

    @property
    def plain(self) -> str:
        return self._shown.plain if self._shown is not None else ""


def boxed(pane, box_id: str) -> Vertical:
    """A pane in a bordered box with a fixed title; its counts line (if any) sits inside, on top."""
    box = Vertical(*([pane.info] if pane.info is not None else []), pane, id=box_id, classes="pane-box")
    box.border_title = pane.TITLE
    return box
