"""The counts line at the top of a pane. Counts change every refresh; kept out of the pane's border
title (a title change repaints the whole bordered pane), a changed count repaints this line only."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class PaneInfo(Static):
    DEFAULT_CSS = """
    PaneInfo { height: 1; color: $text-muted; padding: 0 1; }
    """

    def __init__(self, *, lines: int = 1, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.styles.height = lines
        self._shown: Text | None = None

    def show(self, text: Text | str) -> None:
        text = text if isinstance(text, Text) else Text(text)
        if text != self._shown:  # the same text again would still cost a repaint
            self._shown = text
            self.update(text, layout=False)  # fixed height: a repaint of these lines, no layout pass

    @property
    def plain(self) -> str:
        return self._shown.plain if self._shown is not None else ""
