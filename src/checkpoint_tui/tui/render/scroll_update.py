"""scroll-update: a table's virtual size set without a layout pass, its scrollbars told at most once a
second.

Assigning virtual_size (a reactive with layout=True) schedules a layout pass of the whole screen, which
re-renders every widget, and a table that grows by a row every refresh would pay for one each time.
As Textual does itself for a resize without layout, the size is set quietly and the scrollbars are
updated directly. And a scrollbar repaints whenever it hears of a new size: it hears at most once a
second, in a refresh that paints anyway (the app calls settle_bars on every refresh; a timer of its
own would cost a frame of its own). Scrolling uses the size set at once.

What it buys, measured: docs/tui-render.md (3 to 4 points of a core on a live run).

Private name: Widget._scroll_update (what the layout pass calls: the scrollbars' sizes and visibility,
the scroll offsets clamped)."""

from __future__ import annotations

import time

from textual.geometry import Size
from textual.widget import Widget

from checkpoint_tui.tui.render.switch import SCROLL_UPDATE, on

BARS_EVERY_S = 1.0  # scrollbars follow a growing table at most this often


class QuietVirtualSize:
    """A mixin ahead of ScrollView."""

    _bars_at: float = 0.0  # when the scrollbars last learned the virtual size
    _bars_due: bool = False  # the scrollbars have not heard the latest size
    # provided by the Widget bases
    virtual_size: Size
    container_size: Size
    show_vertical_scrollbar: bool
    show_horizontal_scrollbar: bool

    def set_virtual_size(self, size: Size) -> None:
        if size == self.virtual_size:
            return
        if not on(SCROLL_UPDATE):
            self.virtual_size = size  # Textual's path: a layout pass, which tells the scrollbars
            return
        self.set_reactive(Widget.virtual_size, size)  # type: ignore[attr-defined]
        self._bars_due = True
        width, height = self.container_size
        if (size.height > height) != self.show_vertical_scrollbar or (size.width > width) != (
            self.show_horizontal_scrollbar
        ):
            self.update_bars()  # a bar appears or goes: it decides whether the table can scroll at all
        else:
            self.settle_bars()

    def settle_bars(self) -> None:
        """Tell the scrollbars the table's size if it changed and they last heard a second ago or more
        (called on every refresh, so they are never more than a refresh late after that)."""
        if self._bars_due and time.monotonic() - self._bars_at >= BARS_EVERY_S:
            self.update_bars()

    def can_scroll_now(self) -> bool:
        """Whether a scroll now sees the table's latest size (Textual refuses a scroll until the scrollbars
        have heard the size allows one: on the stock path, that is after the layout pass)."""
        return on(SCROLL_UPDATE) and bool(self.size.height)  # type: ignore[attr-defined]

    def update_bars(self) -> None:
        """Tell the scrollbars the table's size now (on the stock path the layout pass did)."""
        if on(SCROLL_UPDATE):
            self._tell_bars()

    def _tell_bars(self) -> None:
        self._bars_at, self._bars_due = time.monotonic(), False
        self._scroll_update(self.virtual_size)  # type: ignore[attr-defined]
