"""painted-lines: styled lines kept by row for a scrolling table (a mixin for KeyedTable, ahead of
ScrollView).

Textual caches a widget's styled lines by their y and drops them all when it scrolls, so a follow-scroll
restyled every visible line (the bulk of a live refresh). Here styled lines are kept by row: after a
scroll only rows not shown before are styled, by Textual, in runs of adjacent lines.

What it buys, measured: docs/tui-render.md (about 2 points of a core on a live run). Private names:
none; it stands behind the switch with the others because it relies on how Textual styles lines (each
line on its own, whatever the crop), which the tests compare with Textual's own path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from checkpoint_tui.tui.render.switch import PAINTED_LINES, on

if TYPE_CHECKING:  # what it is mixed into (tui/panes/keyed_table.py), for the type checker only
    from textual.scroll_view import ScrollView as _Host
else:
    _Host = object


class PaintedLines(_Host):
    # provided by KeyedTable / its Widget bases
    _top: int
    _painted: dict[object, tuple[tuple, Strip]]
    _pass_base: Style | None
    cursor_row: int
    if TYPE_CHECKING:

        @property
        def row_count(self) -> int:  # the table's (tui/panes/keyed_table.py)
            raise NotImplementedError

    _show_cursor: bool

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines of `crop`: those shown before as they were, the rest styled (see the module)."""
        if not on(PAINTED_LINES):
            return super().render_lines(crop)
        top, scroll_y = self._top, self.scroll_offset.y
        base = self._pass_base = self.rich_style  # one DOM walk per pass (it was one per line)
        filters = tuple(self.get_line_filters())
        context = (crop.x, crop.width, self.size.width, self.scroll_offset.x, base, self.has_focus, filters)
        lines: list[Strip | None] = []
        marks: list[tuple[object, tuple]] = []
        for y in crop.line_range:
            row = y - top + scroll_y
            key: object = "header" if y < top else row if row < self.row_count else "blank"
            mark = (context, row == self.cursor_row and self._show_cursor)
            done = self._painted.get(key)
            lines.append(done[1] if done is not None and done[0] == mark else None)
            marks.append((key, mark))
        try:
            if None in lines:
                for n, strip in self._styled_by_textual(crop, lines):
                    lines[n] = strip
                    key, mark = marks[n]
                    self._painted[key] = (mark, strip)
        finally:
            self._pass_base = None  # render_line outside a pass looks styles up afresh
        return lines  # type: ignore[return-value]  # every None was filled

    def _styled_by_textual(self, crop: Region, lines: list[Strip | None]) -> Iterator[tuple[int, Strip]]:
        """The lines that `lines` lacks, styled by Textual in runs of adjacent lines (each call has a
        fixed cost, colours and styles looked up through the DOM, larger than a line's)."""
        i = 0
        while i < len(lines):
            if lines[i] is not None:
                i += 1
                continue
            j = i
            while j < len(lines) and lines[j] is None:
                j += 1
            yield from enumerate(super().render_lines(Region(crop.x, crop.y + i, crop.width, j - i)), start=i)
            i = j
