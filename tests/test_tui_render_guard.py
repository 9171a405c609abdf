"""The guard on tui/render/: what each trick needs of Textual's private internals is still there on the
pinned Textual, and the upstream code each copies or mirrors has not changed (a sha256 of its source,
recorded for the pin). A failure names the trick and the way back: its stock switch. And nothing else
in the TUI touches a Textual private name; and on the stock switch the app is built of stock Textual
classes, runs none of the tricks' private code, and paints the same screens."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import inspect
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import textual
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Region
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.widgets import Footer, Static

import checkpoint_tui.tui as tui_package
from checkpoint_tui.errors import UsageError
from checkpoint_tui.tui import render
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.render import switch
from checkpoint_tui.tui.render.light_scrollbar import LightBars
from checkpoint_tui.tui.render.painted_lines import PaintedLines
from checkpoint_tui.tui.render.quiet_driver import QuietLinuxDriver
from checkpoint_tui.tui.render.scroll_update import QuietVirtualSize
from checkpoint_tui.tui.render.steady import SteadyLines
from checkpoint_tui.tui.render.switch import (
    LIGHT_SCROLLBAR,
    PAINTED_LINES,
    PLAIN_STYLING,
    QUIET_INPUT_THREAD,
    SCROLL_UPDATE,
    STEADY_LINES,
    TRICKS,
)
from tui_fixtures import FixedSession, after_kill_view, completed_after_kill_view, running_view

PINNED = "8.2.8"  # the version the hashes below were recorded on (pyproject.toml pins it)
TUI = Path(tui_package.__file__).parent
RENDER = TUI / "render"

# Upstream code a trick copies or mirrors: (trick, "module:qualified.name", sha256 of its source on the pin)
UPSTREAM = [
    (STEADY_LINES, "textual._styles_cache:StylesCache.render",
     "0945715ef8aede9b146da2418519f70dcab14ae9d7d26f53f8f29432ef5afa1c"),
    (PLAIN_STYLING, "textual._styles_cache:StylesCache.render_line",
     "928d7496e850dbf620f282f0ccc274bebe3cb568e84bda9ecccd3c4dcb79db7f"),
    (LIGHT_SCROLLBAR, "textual.widget:Widget.vertical_scrollbar",
     "6b140a728f0b50e41f7666c0bf00cddcc2fcdf60f1f1822ac79b1981f4135e6d"),
    (LIGHT_SCROLLBAR, "textual.widget:Widget.horizontal_scrollbar",
     "98aa628a9013eb5a1fa4797af25d49e2f96dc9a81cb51188d6071fad8331ea1a"),
    (LIGHT_SCROLLBAR, "textual.scrollbar:ScrollBarRender.__rich_console__",
     "39854fc82928d6470e7b2a6341512cdf6050202ccea7f1e69a6c3c726549ddf3"),
    (SCROLL_UPDATE, "textual.widget:Widget._scroll_update",
     "edb9f6257285830d14f94d0a27212a96275f14e21ae80350c6a7ce562628b7b8"),
    (QUIET_INPUT_THREAD, "textual.drivers.linux_driver:LinuxDriver.run_input_thread",
     "d796af6d69db337d6fa6bd463984f7d17188d991dbb22f60efb92a8a9619507c"),
]  # fmt: skip


def way_back(trick: str, what: str) -> str:
    return (
        f"{trick}: {what} (Textual {textual.__version__}; recorded on {PINNED}). Switch to stock with "
        f"CHECKPOINT_TUI_STOCK={trick} and re-measure (bench/tui_tick.py --per-trick; docs/tui-render.md)"
    )


def need(trick: str, obj: object, name: str, kind: type | None = None) -> object:
    """obj.name exists (and is a `kind`), or the failure names the trick."""
    owner = obj.__name__ if isinstance(obj, type) else type(obj).__name__
    assert hasattr(obj, name), way_back(trick, f"{owner}.{name} is gone")
    value = getattr(obj, name)
    if kind is not None:
        assert isinstance(value, kind), way_back(trick, f"{owner}.{name} is a {type(value).__name__}, not {kind}")
    return value


def source_of(where: str) -> str:
    module, qualname = where.split(":")
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return inspect.getsource(obj.fget if isinstance(obj, property) else obj)  # type: ignore[arg-type]


def check_upstream(trick: str, where: str, sha: str) -> None:
    try:
        source = source_of(where)
    except (AttributeError, ImportError, OSError, TypeError) as err:
        raise AssertionError(way_back(trick, f"{where} is gone ({err})")) from None
    got = hashlib.sha256(source.encode()).hexdigest()
    assert got == sha, way_back(trick, f"the source of {where} changed (sha256 {got[:12]}…, recorded {sha[:12]}…)")


@pytest.mark.parametrize(("trick", "where", "sha"), UPSTREAM, ids=[f"{t}:{w.split(':')[1]}" for t, w, _ in UPSTREAM])
def test_the_upstream_code_a_trick_copies_is_unchanged(trick, where, sha):
    check_upstream(trick, where, sha)


class OneApp(App):
    def __init__(self, *widgets) -> None:
        super().__init__()
        self.widgets = widgets

    def compose(self) -> ComposeResult:
        yield from self.widgets


async def test_the_private_names_each_trick_relies_on_are_there():
    table, text = KeyedTable([("n", "n")]), Static("line one\nline two")
    async with OneApp(table, text).run_test(size=(40, 12)) as pilot:
        table.sync([(str(i), (str(i),)) for i in range(40)])
        await pilot.pause()
        # steady-lines: a widget's styled lines stay in its styles cache, by y, until marked dirty
        cache = need(STEADY_LINES, text, "_styles_cache")
        held = need(STEADY_LINES, cache, "_cache", dict)
        dirty = need(STEADY_LINES, cache, "_dirty_lines", set)
        lines = text.render_lines(Region(0, 0, text.size.width, 2))
        assert [held.get(y) for y in (0, 1)] == lines, way_back(STEADY_LINES, "the styles cache holds no lines by y")
        text.refresh()
        assert {0, 1} <= dirty, way_back(STEADY_LINES, "refresh() no longer marks the cached lines dirty")
        # plain-styling: the colours the styles cache puts around a line
        inner = need(PLAIN_STYLING, table, "_styles_cache")
        need(PLAIN_STYLING, inner, "get_inner_outer")
        need(PLAIN_STYLING, inner.get_inner_outer(*table.background_colors)[0], "rich_style")
        # light-scrollbar: where a widget keeps its bars, how they are mounted
        assert "_vertical_scrollbar" in vars(table) and "_horizontal_scrollbar" in vars(table), way_back(
            LIGHT_SCROLLBAR, "Widget._vertical_scrollbar / _horizontal_scrollbar are gone"
        )
        need(LIGHT_SCROLLBAR, pilot.app, "_start_widget")
        # scroll-update: what the layout pass calls to tell the scrollbars a size
        update = need(SCROLL_UPDATE, ScrollView, "_scroll_update")
        assert list(inspect.signature(update).parameters) == ["self", "virtual_size"], way_back(
            SCROLL_UPDATE, "Widget._scroll_update takes other arguments"
        )
    # quiet-input-thread: the parser and helpers the copied input thread uses
    for module, name in (("textual._loop", "loop_last"), ("textual._parser", "ParseError"),
                         ("textual._xterm_parser", "XTermParser")):  # fmt: skip
        need(QUIET_INPUT_THREAD, importlib.import_module(module), name)
    parser = importlib.import_module("textual._xterm_parser").XTermParser(False)
    assert need(QUIET_INPUT_THREAD, parser, "_timeout_time") is None
    list(parser.feed("\x1b"))  # a lone ESC: the parser waits for the rest of a sequence, with a timeout
    need(QUIET_INPUT_THREAD, parser, "_timeout_time", float)
    assert sets(LinuxDriver, "_debug"), way_back(QUIET_INPUT_THREAD, "LinuxDriver._debug is gone")


def test_the_guard_names_the_trick_and_the_way_back():  # the checks above must be able to fail
    with pytest.raises(AssertionError, match=r"light-scrollbar: .*CHECKPOINT_TUI_STOCK=light-scrollbar"):
        need(LIGHT_SCROLLBAR, object(), "_vertical_scrollbar")
    with pytest.raises(AssertionError, match=r"quiet-input-thread: the source of .* changed"):
        check_upstream(QUIET_INPUT_THREAD, "textual.drivers.linux_driver:LinuxDriver.run_input_thread", "0" * 64)
    with pytest.raises(AssertionError, match=r"scroll-update: textual.widget:Widget._gone is gone"):
        check_upstream(SCROLL_UPDATE, "textual.widget:Widget._gone", "0" * 64)


# --- no Textual private name outside tui/render/ ------------------------------------------------------


def defined_names(tree: ast.AST) -> set[str]:
    """The private names a piece of Textual defines: methods, class attributes, attributes set on self."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


@functools.cache
def names_of(textual_class: type) -> frozenset[str]:
    return frozenset(defined_names(ast.parse(inspect.getsource(textual_class))))


def sets(cls: type, name: str) -> bool:
    """Whether a Textual class in cls's MRO defines the private `name`."""
    return any(name in names_of(b) for b in cls.__mro__ if b.__module__.startswith("textual"))


@functools.cache
def textual_private_names() -> frozenset[str]:
    """Every private name Textual's own classes define, anywhere in the package."""
    files = Path(textual.__file__).parent.rglob("*.py")
    return frozenset().union(*(defined_names(ast.parse(p.read_text(encoding="utf-8"))) for p in files))


def own_names(trees: list[ast.AST]) -> set[str]:
    """The private names our own code sets or defines (a KeyedTable's `_lines` is ours, not Textual's)."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def private_uses(tree: ast.AST, theirs: set[str], ours: set[str]) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("textual._"):
            found.append(f"{node.lineno}: from {node.module} import …")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("textual._")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("textual"):
            found += [f"{node.lineno}: {node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr in theirs and node.attr not in ours:
            found.append(f"{node.lineno}: .{node.attr}")
    return found


def test_no_textual_private_name_outside_render():
    files = [p for p in sorted(TUI.rglob("*.py")) if RENDER not in p.parents]
    trees = {p: ast.parse(p.read_text()) for p in files}
    theirs, ours = textual_private_names(), own_names(list(trees.values()))
    offenders = [f"{p.relative_to(TUI)}:{use}" for p, tree in trees.items() for use in private_uses(tree, theirs, ours)]
    assert offenders == [], "Textual private names belong in tui/render/, behind a stock switch"


def test_the_scan_sees_private_names():  # the test above must be able to fail
    theirs = textual_private_names()
    assert {"_styles_cache", "_scroll_update", "_start_widget", "_dirty_lines"} <= theirs
    snippet = ast.parse("from textual._loop import loop_last\nx = self._styles_cache._cache\nself.app._start_widget()")
    assert len(private_uses(snippet, theirs, set())) == 4


def test_our_private_names_do_not_shadow_textuals():
    """A private name of ours on a Textual subclass that Textual also uses would silently replace its own."""
    clashes = []
    for path in sorted(p for p in TUI.rglob("*.py") if RENDER not in p.parents):  # render/'s are on purpose
        dotted = ".".join(path.relative_to(TUI.parent).with_suffix("").parts)
        module = importlib.import_module(f"checkpoint_tui.{dotted}")
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or not isinstance(cls := getattr(module, node.name, None), type):
                continue
            for name in sorted(n for n in defined_names(node) if sets(cls, n)):
                clashes.append(f"{path.relative_to(TUI)}: {node.name}.{name}")
    assert clashes == []
    assert sets(KeyedTable, "_vertical_scrollbar") and not sets(KeyedTable, "_painted")  # the check can fail


# --- the switch --------------------------------------------------------------------------------------


def test_the_switch_reads_names_all_and_refuses_a_typo():
    assert switch.parse("") == frozenset()
    assert switch.parse("1") == switch.parse("all") == frozenset(TRICKS)
    assert switch.parse(" steady-lines,LIGHT-SCROLLBAR ") == {STEADY_LINES, LIGHT_SCROLLBAR}
    with pytest.raises(UsageError, match="no trick named steady-line "):
        switch.parse("steady-line")


def test_the_environment_is_read_when_the_tui_is_imported():
    code = "from checkpoint_tui.tui import render; print(','.join(sorted(render.switch.OFF)))"
    for value, off in (("all", ",".join(sorted(TRICKS))), ("scroll-update", "scroll-update"), ("", "")):
        env = {**os.environ, "CHECKPOINT_TUI_STOCK": value}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == off, out.stderr


def test_a_typo_in_the_switch_is_a_usage_error_before_anything_starts(tmp_path):
    env = {**os.environ, "CHECKPOINT_TUI_STOCK": "steady-lines,nope"}
    out = subprocess.run([sys.executable, "-m", "checkpoint_tui", "--home", str(tmp_path)], capture_output=True,
                         text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)  # fmt: skip
    assert out.returncode == 2 and "CHECKPOINT_TUI_STOCK: no trick named nope" in out.stderr
    assert not (tmp_path / "run" / "temporal.db").exists()


# --- the stock path ----------------------------------------------------------------------------------


@pytest.fixture()
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.delenv("TZ")
    time.tzset()


def forbid(monkeypatch, cls: type, name: str, trick: str) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"{trick} ran on the stock path ({cls.__name__}.{name})")

    monkeypatch.setattr(cls, name, refuse)


async def screens_of(view, history_scroll: bool = True) -> tuple[CheckpointApp, list[str]]:
    """The app on fixed data: its screen as SVG, then with the history scrolled to the top."""
    app = CheckpointApp(FixedSession(view), poll_interval=3600)
    app.animation_level = "none"
    shots = []
    async with app.run_test(size=(160, 44)) as pilot:
        for _ in range(100):
            if app.session.polls:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        shots.append(app.export_screenshot())
        if history_scroll:
            app.query_one("#history").scroll_to(y=0, animate=False, immediate=True)
            await pilot.pause()
            shots.append(app.export_screenshot())
        kinds = {
            "screen": type(app.screen), "main": type(app.query_one("#main")), "left": type(app.query_one("#left")),
            "box": type(app.query_one("#history-box")), "footer": type(app.query_one(Footer)),
            "bars": {type(t.vertical_scrollbar) for t in app.query(KeyedTable)},
        }  # fmt: skip
    app.kinds = kinds  # type: ignore[attr-defined]
    return app, shots


@pytest.mark.parametrize("view", [running_view, after_kill_view, completed_after_kill_view])
async def test_on_the_stock_path_the_app_is_stock_textual_and_paints_the_same(view, monkeypatch, utc):
    monkeypatch.setattr(switch, "OFF", frozenset())
    tricks_app, with_tricks = await screens_of(view())
    assert tricks_app.kinds["bars"] != {ScrollBar}  # the tricks path is the tricks path
    monkeypatch.setattr(switch, "OFF", frozenset(TRICKS))
    for cls, name, trick in (
        (SteadyLines, "_still_cached", STEADY_LINES), (SteadyLines, "_cached_strips", STEADY_LINES),
        (PaintedLines, "_styled_by_textual", PAINTED_LINES), (PaintedLines, "_styled_by_us", PLAIN_STYLING),
        (LightBars, "_make_bar", LIGHT_SCROLLBAR), (QuietVirtualSize, "_tell_bars", SCROLL_UPDATE),
    ):  # fmt: skip
        forbid(monkeypatch, cls, name, trick)
    stock_app, stock = await screens_of(view())
    assert stock_app.kinds == {"screen": Screen, "main": Horizontal, "left": Vertical, "box": Vertical,
                               "footer": Footer, "bars": {ScrollBar}}  # fmt: skip
    assert stock_app.get_driver_class() is LinuxDriver
    assert stock == with_tricks  # every cell, every colour


def test_the_driver_is_the_quiet_one_only_with_the_trick_on(monkeypatch):
    monkeypatch.setattr(switch, "OFF", frozenset())
    assert render.driver_class(LinuxDriver) is QuietLinuxDriver
    assert render.driver_class(ScrollBar) is ScrollBar  # type: ignore[arg-type]  # not Linux's: left alone
    monkeypatch.setattr(switch, "OFF", frozenset({QUIET_INPUT_THREAD}))
    assert render.driver_class(LinuxDriver) is LinuxDriver
