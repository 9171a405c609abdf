"""KeyedTable on its own: rows by key, only changed rows re-rendered, following, trimming, and no
layout pass of the screen when rows are added."""

from __future__ import annotations

from textual.app import App, ComposeResult

from checkpoint_tui.tui.panes.keyed_table import KeyedTable

COLUMNS = [("n", "n"), ("word", "word")]


class TableApp(App):
    def __init__(self, table: KeyedTable) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table


def rows(n: int, start: int = 0, word: str = "w") -> list[tuple[str, tuple[str, str]]]:
    return [(str(i), (str(i), f"{word}{i}")) for i in range(start, start + n)]


async def test_changed_rows_only_are_rendered_again_and_follow_shows_the_last():
    table = KeyedTable(COLUMNS)
    async with TableApp(table).run_test(size=(40, 12)) as pilot:
        table.sync(rows(30), follow=True)
        await pilot.pause()
        assert table.row_count == 30 and table.cursor_row == 29
        visible = table.scrollable_content_region.height - 1
        assert table.scroll_offset.y == 30 - visible  # the last row sits on the bottom line
        rendered = dict(table._strips)
        assert rendered and all(i >= 30 - visible for i in rendered)  # only what was on screen

        table.sync([("29", ("29", "x29"))] + rows(29), follow=True)  # one changed (same width), the rest as before
        assert table.get_cell("29", "word") == "x29"
        assert 29 not in table._strips and all(table._strips[i] is rendered[i] for i in rendered if i != 29)
        await pilot.pause()
        assert "x29" in table.render_line(visible).text


async def test_adding_rows_schedules_no_layout_pass():
    table = KeyedTable(COLUMNS)
    async with TableApp(table).run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        layouts = []
        original = table.refresh

        def spy(*regions, **kwargs):
            if kwargs.get("layout"):
                layouts.append(kwargs)
            return original(*regions, **kwargs)

        table.refresh = spy  # type: ignore[method-assign]
        for start in range(0, 50, 5):  # grows past the pane: the scrollbar appears once
            table.sync(rows(5, start), follow=True)
            await pilot.pause()
        assert table.row_count == 50 and table.virtual_size.height == 51
        assert len(layouts) <= 1, layouts


async def test_a_log_keeps_only_the_newest_rows():
    log = KeyedTable([("line", "")], header=False, pad=0, max_rows=100, cursor=False, zebra=False)
    async with TableApp(log).run_test(size=(40, 12)) as pilot:
        for start in range(0, 500, 50):
            log.sync(((k, (k,)) for k, _ in rows(50, start)), follow=True)
        await pilot.pause()
        assert 100 <= log.row_count <= 110
        assert log.row_keys()[-1] == "499" and "0" not in log.row_keys()
        assert log.get_cell("499", "line") == "499"
        bottom = log.scroll_offset.y
        assert bottom == log.row_count - log.scrollable_content_region.height  # followed to the end
        log.focus()
        await pilot.press("up", "up")  # no cursor in a log: the keys scroll it
        assert log.scroll_offset.y == bottom - 2


async def test_a_follow_jump_restyles_only_rows_not_shown_before():
    table = KeyedTable(COLUMNS)
    async with TableApp(table).run_test(size=(40, 12)) as pilot:
        table.sync(rows(30), follow=True)
        await pilot.pause()
        top = table.scroll_offset.y
        before = {row: line for row, (_, line) in table._painted.items() if isinstance(row, int)}
        assert before and min(before) == top
        table.sync(rows(8, 30), follow=True)  # past the bottom: a half-page jump
        await pilot.pause()
        assert table.scroll_offset.y > top
        kept = [row for row in before if row >= table.scroll_offset.y and row != 29]  # 29 lost the cursor
        assert kept and all(table._painted[row][1] is before[row] for row in kept)
        assert any(isinstance(row, int) and row >= 30 for row in table._painted)  # the new rows, styled once


async def test_scrollbars_hear_the_size_at_most_once_a_second_and_catch_up(monkeypatch):
    from checkpoint_tui.tui.render import scroll_update

    table = KeyedTable(COLUMNS)
    async with TableApp(table).run_test(size=(40, 12)) as pilot:
        table.sync(rows(30), follow=True)
        await pilot.pause()
        bar = table.vertical_scrollbar
        assert bar.window_virtual_size == 31
        table.sync(rows(5, 30), follow=True)  # within the second: the bar has not heard
        assert bar.window_virtual_size == 31 and table.virtual_size.height == 36
        monkeypatch.setattr(scroll_update, "BARS_EVERY_S", 0.0)
        table.settle_bars()  # what the app does on its next refresh
        assert bar.window_virtual_size == 36


async def test_a_trim_renumbers_rendered_rows_instead_of_rendering_them_again():
    table = KeyedTable(COLUMNS, max_rows=100)  # striped: an odd drop would move every stripe
    async with TableApp(table).run_test(size=(40, 12)) as pilot:
        table.sync(rows(100, 1000), follow=True)  # four digits each: no column grows (that renders all again)
        await pilot.pause()
        shown = {table.row_keys()[row]: line for row, (_, line) in table._painted.items() if isinstance(row, int)}
        table.sync(rows(11, 1100), follow=False)  # 111 > 110: the oldest rows go
        await pilot.pause()
        assert table.row_count <= 100 and "1000" not in table.row_keys()
        keys = table.row_keys()
        kept = {keys[row]: line for row, (_, line) in table._painted.items() if isinstance(row, int)}
        assert set(shown) & set(kept) and all(kept[k] is shown[k] for k in set(shown) & set(kept))
        region = table.size.region
        lines = table.render_lines(region)
        table._painted.clear(), table._lines.clear(), table._strips.clear()
        assert [line.text for line in lines] == [line.text for line in table.render_lines(region)]
        fresh = table.render_lines(region)
        assert [[seg.style for seg in line] for line in lines] == [[seg.style for seg in line] for line in fresh]
