"""A few lines of Rich text drawn straight to strips, redrawn only when the text (or the width) changes.

The status bar and the panes' counts lines change about once a second while a run is live. As Statics
each change went through Textual's content pipeline (a Content built from the Text, wrapped, formatted,
then styled); here it is a Rich wrap and one style pass."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    DEFAULT_CSS = """
    TextLines { height: auto; }
    """

    def __init__(self, text: Text | str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self._text = _as_text(text)
        self._drawn: tuple | None = None  # (width, style) the lines below were drawn for
        self._lines: list[Strip] = []

    @property
    def text(self) -> Text:
        return self._text

    def set_text(self, text: Text | str) -> None:
        """Show `text` (plain text, never markup); an unchanged text costs nothing."""
        text = _as_text(text)
        if text == self._text:
            return
        self._text, self._drawn = text, None
        height = self.styles.height
        self.refresh(layout=height is None or height.is_auto)  # a fixed height repaints, no layout pass

    def render(self) -> Text:
        return self._text

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._wrapped(width))

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        base = self.rich_style
        if self._drawn != (width, base):
            console = self.app.console
            strips = [Strip(line.render(console, end="")).apply_style(base) for line in self._wrapped(width)]
            self._lines = [strip.adjust_cell_length(width, base) for strip in strips]
            self._drawn = (width, base)
        return self._lines[y] if y < len(self._lines) else Strip.blank(width, base)

    def _wrapped(self, width: int) -> list[Text]:
        if width <= 0:
            return []
        return list(self._text.wrap(self.app.console, width, overflow="fold"))


def _as_text(text: Text | str) -> Text:
    return text if isinstance(text, Text) else Text(text)
