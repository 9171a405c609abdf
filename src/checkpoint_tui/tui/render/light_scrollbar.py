"""light-scrollbar: a scrollbar drawn straight to Strips, redrawn only when what it shows changes.

Textual's ScrollBar renders through Rich (a renderable, a console pass, line splitting, then the styles
cache) on every change of position or size, and the tables following a live run change both several
times a second: it was the largest single item of the app's live CPU. The bar is the same one
Textual draws (its own ScrollBarRender.render_bar, its own colours for normal / hover / grabbed);
only the path to the screen is shorter, and an unchanged bar is not drawn again.

What it buys, measured: docs/tui-render.md (about 2 points of a core on a live run).

Private names: Widget._vertical_scrollbar and Widget._horizontal_scrollbar (where Textual keeps a
widget's bars: its vertical_scrollbar / horizontal_scrollbar properties make them), App._start_widget
(how those properties mount a bar)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from rich.color import Color as RichColor
from rich.segment import Segment
from rich.style import Style
from textual.app import App
from textual.color import Color
from textual.filter import LineFilter
from textual.geometry import Region
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget

from checkpoint_tui.tui.render.switch import LIGHT_SCROLLBAR, on

if TYPE_CHECKING:  # what it is mixed into (a ScrollView), for the type checker only
    from textual.scroll_view import ScrollView as _Host
else:
    _Host = object


class LightScrollBar(ScrollBar):
    def __init__(self, vertical: bool = True, name: str | None = None, *, thickness: int = 1) -> None:
        super().__init__(vertical, name, thickness=thickness)
        self._drawn: tuple | None = None  # what the strips below show
        self._strips: list[Strip] = []
        self._fresh = False  # no refresh() since the strips were drawn

    def refresh(self, *regions: Region, **kwargs) -> Self:
        self._fresh = False  # anything that changes how the bar looks asks for a repaint
        return super().refresh(*regions, **kwargs)

    def render_lines(self, crop: Region) -> list[Strip]:
        width, height = self.size
        if not (self._fresh and len(self._strips) == height and self._drawn and self._drawn[0] == width):
            self._fresh = self._update(width, height)
            if not self._fresh:
                return super().render_lines(crop)  # a styling Textual draws differently: its own path
        lines = self._strips[crop.y : crop.bottom]
        if crop.x or crop.width != width:
            lines = [line.crop(crop.x, crop.right) for line in lines]
        return lines

    def _update(self, width: int, height: int) -> bool:
        """Draw the bar again if what it shows changed; False if Textual is to draw it."""
        if self.screen.styles.scrollbar_color.a == 0 or not isinstance(self.parent, Widget):
            return False
        bar = self.render()  # Textual's choice of colours and sizes, not rendered yet
        if not isinstance(bar, ScrollBarRender):
            return False
        _, background = self.background_colors
        base = self.rich_style  # the widget's own colours under the bar's, as Textual's path applies them
        filters = tuple(self.get_line_filters())
        drawn = (width, height, bar.virtual_size, bar.window_size, bar.position, bar.style, base, background, filters)
        if drawn != self._drawn:
            self._strips = self._draw(bar, width, height, base, background, filters)
            self._drawn = drawn
        return True

    def _draw(
        self,
        bar: ScrollBarRender,
        width: int,
        height: int,
        base: Style,
        background: Color,
        filters: tuple[LineFilter, ...],
    ) -> list[Strip]:
        style = bar.style
        assert isinstance(style, Style)  # a scrollbar's rich style (never a style name)
        segments = bar.render_bar(
            size=height if self.vertical else width,
            virtual_size=bar.virtual_size,
            window_size=bar.window_size,
            position=bar.position,
            thickness=width if self.vertical else height,
            vertical=self.vertical,
            back_color=style.bgcolor or RichColor.parse("#555555"),  # as ScrollBarRender falls back
            bar_color=style.color or RichColor.parse("bright_magenta"),
        )
        if self.vertical:  # one segment per line
            lines = [[segment] for segment in segments.segments]
        else:
            lines = list(Segment.split_lines(segments.segments))
        strips: list[Strip] = []
        done: dict[tuple[Segment, ...], Strip] = {}  # a bar is a few distinct lines, each filtered once
        for line in lines[:height]:
            key = tuple(line)
            strip = done.get(key)
            if strip is None:
                strip = Strip(line).apply_style(base).adjust_cell_length(width)
                for line_filter in filters:
                    strip = strip.apply_filter(line_filter, background)
                done[key] = strip
            strips.append(strip)
        return strips


class LightBars(_Host):
    """Textual's scrollbar properties for a scrolling widget, making LightScrollBars (a mixin that is
    not a Widget: a Widget base ahead of ScrollView would bring Widget's default CSS back over it)."""

    _vertical_scrollbar: ScrollBar | None
    _horizontal_scrollbar: ScrollBar | None
    scrollbar_size_vertical: int
    scrollbar_size_horizontal: int
    app: App

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        if not on(LIGHT_SCROLLBAR):
            return super().vertical_scrollbar
        if self._vertical_scrollbar is None:
            self._vertical_scrollbar = self._make_bar(True, self.scrollbar_size_vertical)
        return self._vertical_scrollbar

    @property
    def horizontal_scrollbar(self) -> ScrollBar:
        if not on(LIGHT_SCROLLBAR):
            return super().horizontal_scrollbar
        if self._horizontal_scrollbar is None:
            self._horizontal_scrollbar = self._make_bar(False, self.scrollbar_size_horizontal)
        return self._horizontal_scrollbar

    def _make_bar(self, vertical: bool, thickness: int) -> LightScrollBar:
        bar = LightScrollBar(vertical=vertical, name="vertical" if vertical else "horizontal", thickness=thickness)
        bar.display = False  # as Textual starts its own: shown once there is something to scroll
        self.app._start_widget(self, bar)
        return bar
