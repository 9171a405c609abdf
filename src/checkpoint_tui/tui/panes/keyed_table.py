"""A DataTable updated by row key: new rows are appended, changed cells updated in place."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.text import Text
from textual.widgets import DataTable

Cell = str | Text


class KeyedTable(DataTable):
    DEFAULT_CSS = """
    KeyedTable { height: 1fr; }
    """

    def __init__(self, columns: Sequence[tuple[str, str]], **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self._column_spec = columns
        self._shown: dict[str, tuple[Cell, ...]] = {}

    def on_mount(self) -> None:
        for key, label in self._column_spec:
            self.add_column(label, key=key)

    def sync(self, rows: Iterable[tuple[str, tuple[Cell, ...]]], follow: bool = False) -> None:
        """Apply rows (key, cells). Only cells whose value changed are touched."""
        added = False
        for key, cells in rows:
            old = self._shown.get(key)
            if old is None:
                self.add_row(*cells, key=key)
                added = True
            elif old != cells:
                for (col, _), new, prev in zip(self._column_spec, cells, old, strict=True):
                    if new != prev:
                        self.update_cell(key, col, new, update_width=True)
            self._shown[key] = cells
        if added and follow:
            self.move_cursor(row=self.row_count - 1)

    def set_titles(self, title: str, subtitle: str | None = None) -> None:
        """Set border titles only when they change (each set costs a refresh)."""
        if self.border_title != title:
            self.border_title = title
        if subtitle is not None and self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def reset(self) -> None:
        self.clear()
        self._shown.clear()
