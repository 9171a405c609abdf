"""steady-lines: widgets that hand back their last lines when nothing about them changed.

Each frame Textual re-renders every widget that overlaps the union of the frame's dirty regions, and
with the tables of a live run changing on both sides that union is most of the screen. A widget whose
styled lines are all still in its styles cache is cheap to draw, but asking still looks up its colours,
padding, opacity and line filters through the DOM, for each of the dozen containers, counts lines
and the footer, on every frame. Here the answer is kept: if the styles cache still holds the very
strips the last answer was made from (a change of content, style or size clears or re-renders them),
for the same crop, size and filters, the last answer is the answer.

Private names: Widget._styles_cache, and its StylesCache._cache and StylesCache._dirty_lines."""

from __future__ import annotations

from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Footer

from checkpoint_tui.tui.render.switch import STEADY_LINES, on


class SteadyLines:
    """A mixin ahead of a Widget class."""

    _steady: tuple | None = None  # (crop, size, filters, the cache's strips, the lines handed back)

    def render_lines(self, crop: Region) -> list[Strip]:
        if not on(STEADY_LINES):
            return super().render_lines(crop)  # type: ignore[misc]
        size, filters = self.size, tuple(self.get_line_filters())  # type: ignore[attr-defined]
        last = self._steady
        if last is not None and last[:3] == (crop, size, filters) and self._still_cached(crop, last[3]):
            return last[4]
        lines = super().render_lines(crop)  # type: ignore[misc]
        made = self._cached_strips(crop)
        self._steady = (crop, size, filters, made, lines) if None not in made else None
        return lines

    def _still_cached(self, crop: Region, strips: list[Strip]) -> bool:
        """The styles cache holds, clean, the very strips the last answer was made from."""
        cache = self._styles_cache  # type: ignore[attr-defined]
        if cache._dirty_lines:
            return False
        held = cache._cache
        return all(held.get(y) is strip for y, strip in zip(crop.line_range, strips, strict=True))

    def _cached_strips(self, crop: Region) -> list[Strip | None]:
        held = self._styles_cache._cache  # type: ignore[attr-defined]
        return [held.get(y) for y in crop.line_range]


class SteadyVertical(SteadyLines, Vertical):
    pass


class SteadyHorizontal(SteadyLines, Horizontal):
    pass


class SteadyFooter(SteadyLines, Footer):
    pass


class SteadyScreen(SteadyLines, Screen):
    pass
