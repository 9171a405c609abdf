"""A table updated by row key, rendered with the Line API: each row is rendered to a Strip once and
kept until that row (or a column's width) changes.

Textual's DataTable re-rendered every visible cell after any update (its caches are keyed by an
update counter): with a run live, two tables cost ~0.15 s of CPU per refresh, most of the app's
61 % of a core. Here a refresh re-renders only the rows that changed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from rich.cells import cell_len
from rich.control import strip_control_codes
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from checkpoint_tui.tui.render.light_scrollbar import LightBars
from checkpoint_tui.tui.render.painted_lines import PaintedLines
from checkpoint_tui.tui.render.scroll_update import QuietVirtualSize

Cell = str | Text
PAD = 1  # spaces either side of a cell, as DataTable draws them
MAX_WIDTH = 200  # a column never grows past this; longer cells end in an ellipsis (scroll sideways)


class KeyedTable(PaintedLines, LightBars, QuietVirtualSize, ScrollView, can_focus=True):
    DEFAULT_CSS = """
    KeyedTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        &:focus { background-tint: $foreground 5%; }
        & > .keyed-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .keyed-table--even-row { background: $surface-lighten-1 50%; }
        &:dark > .keyed-table--even-row { background: $surface-darken-1 40%; }
        & > .keyed-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus > .keyed-table--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
    }
    """
    COMPONENT_CLASSES = {"keyed-table--header", "keyed-table--even-row", "keyed-table--cursor"}
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-20)", "Page up", show=False),
        Binding("pagedown", "cursor(20)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "First", show=False),
        Binding("end", "cursor_to(-1)", "Last", show=False),
    ]

    def __init__(
        self,
        columns: Sequence[tuple[str, str]],
        *,
        header: bool = True,
        pad: int = PAD,
        max_rows: int | None = None,
        cursor: bool = True,
        zebra: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self._column_spec = list(columns)
        self._column_index = {key: i for i, (key, _) in enumerate(columns)}
        self._top = 1 if header else 0  # lines above the first row
        self._pad = pad
        self._max_rows = max_rows  # keep only the newest rows (a log)
        self._show_cursor, self._zebra = cursor, zebra
        self._widths = self._label_widths()
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._cells: list[tuple[Cell, ...]] = []
        self._made_from: dict[str, object] = {}  # row key -> the record its cells were made from (sync_records)
        self._strips: dict[int, Strip] = {}  # row index -> rendered row (without row styles)
        self._lines: dict[int, tuple[tuple, Strip]] = {}  # row index -> (view key, the line as last shown)
        self._painted: dict[object, tuple[tuple, Strip]] = {}  # row index -> (context, the styled line)
        self._header: Strip | None = None
        self.cursor_row = -1
        self._pass_base: Style | None = None  # during a render pass: the widget's style, looked up once
        self._components: dict[tuple, Style] = {}  # component styles by (name, focus, widget style)

    # --- data ---------------------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._keys)

    def row_keys(self) -> list[str]:
        return list(self._keys)

    def get_cell(self, row_key: str, column_key: str) -> Cell:
        return self._cells[self._index[row_key]][self._column_index[column_key]]

    def sync(self, rows: Iterable[tuple[str, tuple[Cell, ...]]], follow: bool = False) -> None:
        """Apply rows (key, cells): new keys are appended, changed rows re-rendered, the rest untouched.
        With `follow`, the cursor follows new rows while it is on the last one (a user who moved it up
        is left where they are), and the view jumps half a page when the new row falls below it: a
        scroll repaints the whole pane, so it happens once every half page rather than on every row."""
        at_end = self.cursor_row in (-1, self.row_count - 1)
        changed: list[int] = []
        added = False
        for key, cells in rows:
            if len(cells) != len(self._column_spec):
                raise ValueError(f"row {key!r} has {len(cells)} cells for {len(self._column_spec)} columns")
            i = self._index.get(key)
            if i is None:
                i = self._index[key] = len(self._keys)
                self._keys.append(key)
                self._cells.append(cells)
                added = True
            elif self._cells[i] == cells:
                continue
            else:
                self._cells[i] = cells
            self._strips.pop(i, None)
            self._lines.pop(i, None)
            self._painted.pop(i, None)
            changed.append(i)
            self._grow_widths(cells)
        if added:
            if self._max_rows is not None and self.row_count > self._max_rows * 1.1:
                self._trim()
                changed = []
            self._resize()
            if follow and at_end:
                self._move_cursor(self.row_count - 1, jump=True)
            self._forget_far_rows()
        if changed:
            self._refresh_rows(changed)
        elif added:
            self.refresh()

    def sync_records(
        self, records: Iterable[tuple[str, object]], cells: Callable[[Any], tuple[Cell, ...]], follow: bool = False
    ) -> None:
        """sync() for rows made from records (key, record): a record equal to the one its row was made
        from is skipped before its cells are made (polls send recent rows again, most of them unchanged)."""
        made = self._made_from

        def changed() -> Iterator[tuple[str, tuple[Cell, ...]]]:
            for key, record in records:
                if made.get(key, made) != record:
                    made[key] = record
                    yield key, cells(record)

        self.sync(changed(), follow)

    def _refresh_rows(self, rows: list[int]) -> None:
        """Repaint the changed rows that are in view, as one region: each refresh call has a cost, and
        a history flush brings dozens of rows at once, most of them below the view until it follows."""
        shift = self._top - self.scroll_offset.y
        shown = [y for y in (row + shift for row in rows) if 0 <= y < self.size.height]
        if shown:
            first = min(shown)
            self.refresh(Region(0, first, max(self.virtual_size.width, self.size.width), max(shown) - first + 1))

    def _forget_far_rows(self) -> None:
        """Rendered rows are kept only near the view: each Strip is a dozen objects for the garbage
        collector to walk, and keeping every row ever shown made a long run's collections (and the
        app's CPU) grow with its length. A row scrolled back to is rendered again."""
        page = max(1, self.scrollable_content_region.height)
        if len(self._strips) + len(self._painted) < 8 * page + 64:
            return
        top = self.scroll_offset.y
        keep = range(top - 2 * page, top + 3 * page)
        for cache in (self._strips, self._lines, self._painted):
            for row in [r for r in cache if isinstance(r, int) and r not in keep]:
                del cache[row]

    def insert_before(self, before: str, key: str, cells: tuple[Cell, ...]) -> int | None:
        """Insert a row above the row `before` (a marker between log lines); returns its index, None if
        `before` is not shown or `key` already is. Rare: every row below is renumbered and re-rendered."""
        i = self._index.get(before)
        if i is None or key in self._index:
            return None
        self._keys.insert(i, key)
        self._cells.insert(i, cells)
        self._index = {k: n for n, k in enumerate(self._keys)}
        self._strips.clear()
        self._lines.clear()
        self._painted.clear()
        if self.cursor_row >= i:
            self.cursor_row += 1
        self._grow_widths(cells)
        self._resize()
        self.refresh()
        return i

    def _trim(self) -> None:
        """Drop the oldest rows beyond max_rows (in batches: each drop renumbers every row). Rendered
        rows are renumbered too, not rendered again (a history pane trims every few seconds); an even
        number is dropped so that striped rows keep their stripe."""
        drop = self.row_count - (self._max_rows or 0)
        drop += drop % 2
        for key in self._keys[:drop]:
            self._made_from.pop(key, None)
        del self._keys[:drop], self._cells[:drop]
        self._index = {key: i for i, key in enumerate(self._keys)}
        for cache in (self._strips, self._lines, self._painted):
            kept = _renumbered(cache, drop)
            cache.clear()
            cache.update(kept)
        self.cursor_row = max(-1, self.cursor_row - drop)
        self.refresh()

    def reset(self) -> None:
        self._keys, self._index, self._cells, self._strips, self._lines = [], {}, [], {}, {}
        self._painted.clear()
        self._made_from.clear()
        self._widths = self._label_widths()
        self._header = None
        self.cursor_row = -1
        self._resize()
        self.refresh()

    def _grow_widths(self, cells: tuple[Cell, ...]) -> None:
        grew = False
        for c, cell in enumerate(cells):
            width = min(cell.cell_len if isinstance(cell, Text) else cell_len(cell), MAX_WIDTH)
            if width > self._widths[c]:
                self._widths[c] = width
                grew = True
        if grew:  # every row is laid out on the same columns
            self._strips.clear()
            self._lines.clear()
            self._painted.clear()
            self._header = None
            self._resize()
            self.refresh()

    def _label_widths(self) -> list[int]:
        return [min(cell_len(label), MAX_WIDTH) if self._top else 0 for _, label in self._column_spec]

    def _resize(self) -> None:
        self.set_virtual_size(Size(sum(w + 2 * self._pad for w in self._widths), self.row_count + self._top))

    # --- cursor -------------------------------------------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        if not self._show_cursor:  # a log: the keys scroll it
            self.scroll_relative(y=delta, animate=False)
        elif self.row_count:
            self._move_cursor(max(0, min(self.row_count - 1, self.cursor_row + delta)))

    def action_cursor_to(self, row: int) -> None:
        if not self._show_cursor:
            self.scroll_to(y=0 if row == 0 else self.max_scroll_y, animate=False)
        elif self.row_count:
            self._move_cursor(row % self.row_count)

    def _move_cursor(self, row: int, jump: bool = False) -> None:
        old, self.cursor_row = self.cursor_row, row
        if self._show_cursor:
            self._refresh_rows([i for i in (old, row) if i >= 0])
        self._scroll_to_cursor(jump)  # the virtual size is already set (quietly, in _resize)

    def _scroll_to_cursor(self, jump: bool = False, deferred: bool = False) -> None:
        """Keep the cursor row in view below the header; a `jump` past the bottom leaves it mid-pane.
        The first rows can arrive before the first layout (no size yet), and on Textual's stock path a
        new size is known only after the layout it asks for: then once, after it."""
        if not self.can_scroll_now() and not deferred:
            self.call_after_refresh(self._scroll_to_cursor, jump, True)
            return
        if deferred:
            self.update_bars()  # sized now: whether it can scroll is known only from here
        row, top = self.cursor_row, self.scroll_offset.y
        visible = max(1, self.scrollable_content_region.height - self._top)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + visible:
            below = visible // 2 if jump else visible - 1  # rows left visible above the cursor
            self.scroll_to(y=row - below, animate=False, immediate=True)

    def on_resize(self) -> None:
        """A table following its newest row keeps it in view when its size changes: shown again after
        `display: none` (the narrow layout's other panes, whose rows came while they were 0x0), or given
        fewer lines."""
        if self.row_count and self.cursor_row == self.row_count - 1:
            self._scroll_to_cursor()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if not self.size.area and round(old_value) != round(new_value):
            # Off screen (display: none: the narrow layout's other panes) a widget's size is 0x0, so
            # ScrollView's repaint of its size region marks no line dirty, and Textual keeps the lines
            # it styled at the old offset: shown again at the same size, it would paint those under
            # the new one. A refresh of the whole widget drops them.
            self.refresh()

    # --- rendering ----------------------------------------------------------------------------------

    def _render_cells(self, cells: Sequence[Cell], style: Style | None = None) -> Strip:
        console = self.app.console
        segments: list[Segment] = []
        pad = Segment(" " * self._pad)
        for cell, width in zip(cells, self._widths, strict=True):
            if isinstance(cell, str):  # most cells: one segment, no Text (as Text would, control codes go)
                plain = strip_control_codes(cell)
                room = width - cell_len(plain)
                if room >= 0:
                    segments.append(Segment(f"{pad.text}{plain}{' ' * room}{pad.text}"))
                    continue
            text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
            text.no_wrap = True
            text.truncate(width, overflow="ellipsis", pad=True)
            segments.append(pad)
            segments.extend(text.render(console, end=""))
            segments.append(pad)
        strip = Strip(segments, sum(w + 2 * self._pad for w in self._widths))
        return strip.apply_style(style) if style else strip

    lines_painted = 0  # every table's render_line calls (lines the compositor found dirty), for the bench

    @classmethod
    def take_lines_painted(cls) -> int:
        n, KeyedTable.lines_painted = KeyedTable.lines_painted, 0
        return n

    def _component(self, name: str) -> Style:
        """A component style (cursor, stripe), looked up through the DOM once per look of the table:
        they change with focus and with the theme (which changes the table's own style too)."""
        if self._pass_base is None:  # outside a render pass
            return self.get_component_rich_style(name)
        key = (name, self.has_focus, self._pass_base)
        style = self._components.get(key)
        if style is None:
            if len(self._components) > 64:
                self._components.clear()
            style = self._components[key] = self.get_component_rich_style(name)
        return style

    def render_line(self, y: int) -> Strip:
        KeyedTable.lines_painted += 1
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self._pass_base or self.rich_style
        if y < self._top:
            if self._header is None:
                labels = [Text(label) for _, label in self._column_spec]
                self._header = self._render_cells(labels, self.get_component_rich_style("keyed-table--header"))
            return self._header.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)
        row = y - self._top + scroll_y
        if row >= self.row_count:
            return Strip.blank(width, base)
        cursor = row == self.cursor_row and self._show_cursor
        key = (scroll_x, width, cursor, self.has_focus, base)
        done = self._lines.get(row)
        if done is not None and done[0] == key:
            return done[1]  # scrolling re-asks for every visible line: most are unchanged
        strip = self._strips.get(row)
        if strip is None:
            strip = self._strips[row] = self._render_cells(self._cells[row])
        if cursor:  # one style pass: base + (row + cell) is (base + row) + cell
            style = base + self._component("keyed-table--cursor")
        elif row % 2 == 0 and self._zebra:
            style = base + self._component("keyed-table--even-row")
        else:
            style = base
        line = strip.apply_style(style).crop_extend(scroll_x, scroll_x + width, base)
        self._lines[row] = (key, line)
        return line


def _renumbered(cache: dict, drop: int) -> dict:
    """Row-keyed entries moved up by `drop` rows (the dropped ones left out); named entries as they are."""
    return {k if isinstance(k, str) else k - drop: v for k, v in cache.items() if isinstance(k, str) or k >= drop}
