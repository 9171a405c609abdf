"""The counts line at the top of a pane. Counts change every refresh; kept out of the pane's border
title (a title change repaints the whole bordered pane), a changed count repaints this line only."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

COUNTS_EVERY_S = 1.0


class PaneInfo(Static):
    DEFAULT_CSS = """
    PaneInfo { height: 1; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, *, lines: int = 1, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.styles.height = lines
        self._shown: Text | None = None
        self._shown_at = 0.0

    def show(self, text: Text | str, now: bool = False) -> None:
        """Counts repaint at most once every COUNTS_EVERY_S unless `now` (panes call this on every
        refresh, so a count held back is shown on a later one)."""
        text = text if isinstance(text, Text) else Text(text)
        if text == self._shown:  # the same text again would still cost a repaint
            return
        at = time.monotonic()
        if now or at - self._shown_at >= COUNTS_EVERY_S:
            self._shown, self._shown_at = text, at
            self.update(text, layout=False)  # fixed height: a repaint of these lines, no layout pass

    def expire(self) -> None:
        """The next show() repaints at once (another run: its counts are news)."""
        self._shown_at = 0.0

    @property
    def plain(self) -> str:
        return self._shown.plain if self._shown is not None else ""
