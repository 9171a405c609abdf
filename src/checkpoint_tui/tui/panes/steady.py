"""Widgets that hand back their last lines when nothing about them changed.

Each frame Textual re-renders every widget that overlaps the union of the frame's dirty regions, and
with the tables of a live run changing on both sides that union is most of the screen. A widget whose
styled lines are all still in its styles cache is cheap to draw, but asking still looks up its colours,
padding, opacity and line filters through the DOM, for each of the dozen containers, counts lines
and the footer, on every frame. Here the answer is kept: if the styles cache still holds the very
strips the last answer was made from (a change of content, style or size clears or re-renders them),
for the same crop, size and filters, the last answer is the answer."""

from __future__ import annotations

from textual.containers import Horizontal, Vertical
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Footer


class SteadyLines:
    """A mixin ahead of a Widget class."""

    _steady: tuple | None = None  # (crop, size, filters, the cache's strips, the lines handed back)

    def render_lines(self, crop: Region) -> list[Strip]:
        cache = self._styles_cache  # type: ignore[attr-defined]
        size, filters = self.size, tuple(self.get_line_filters())  # type: ignore[attr-defined]
        last = self._steady
        if last is not None and last[0] == crop and last[1] == size and last[2] == filters and not cache._dirty_lines:
            held = cache._cache
            if all(held.get(y) is strip for y, strip in zip(crop.line_range, last[3], strict=True)):
                return last[4]
        lines = super().render_lines(crop)  # type: ignore[misc]
        made = [cache._cache.get(y) for y in crop.line_range]
        self._steady = (crop, size, filters, made, lines) if None not in made else None
        return lines


class SteadyVertical(SteadyLines, Vertical):
    pass


class SteadyHorizontal(SteadyLines, Horizontal):
    pass


class SteadyFooter(SteadyLines, Footer):
    pass


class SteadyScreen(SteadyLines, Screen):
    pass


def boxed(pane, box_id: str) -> SteadyVertical:
    """A pane in a bordered box with a fixed title; its counts line (if any) sits inside, on top."""
    box = SteadyVertical(*([pane.info] if pane.info is not None else []), pane, id=box_id, classes="pane-box")
    box.border_title = pane.TITLE
    return box
