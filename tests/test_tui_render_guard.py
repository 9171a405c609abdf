"""The guard on tui/render/: what each trick needs of Textual's private internals is still there on the
pinned Textual, and the upstream code each copies, mirrors or goes round has not changed (a sha256 of
its source, recorded for the pin). A failure names the trick and the way back: its stock switch. And
nothing else in the TUI touches a Textual private name; and on the stock switch the app runs Textual's
own scrollbars and none of the tricks' code, and paints the same screens."""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest
import textual
from textual.app import App, ComposeResult
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar

import checkpoint_tui.tui as tui_package
from checkpoint_tui.errors import UsageError
from checkpoint_tui.tui.app import CheckpointApp
from checkpoint_tui.tui.panes.keyed_table import KeyedTable
from checkpoint_tui.tui.render import switch
from checkpoint_tui.tui.render.light_scrollbar import LightBars, LightScrollBar
from checkpoint_tui.tui.render.painted_lines import PaintedLines
from checkpoint_tui.tui.render.scroll_update import QuietVirtualSize
from checkpoint_tui.tui.render.switch import LIGHT_SCROLLBAR, PAINTED_LINES, SCROLL_UPDATE, TRICKS
from tui_fixtures import FixedSession, after_kill_view, completed_after_kill_view, running_view

PINNED = "8.2.8"  # the version the hashes below were recorded on (pyproject.toml pins it)
TUI = Path(tui_package.__file__).parent
RENDER = TUI / "render"

# Upstream code a trick copies, mirrors or goes round: (trick, "module:qualified.name", sha256 of its
# source on the pin). painted-lines calls Widget.render_lines on runs of lines and keeps what it made
# by row: it counts on each line being styled on its own, whatever the crop.
UPSTREAM = [
    (
        PAINTED_LINES,
        "textual.widget:Widget.render_lines",
        "1f2a11f3d51846d98e590f5f0eb01e1742dccb4f4671569bc89a519d45e4448a",
    ),
    (
        LIGHT_SCROLLBAR,
        "textual.widget:Widget.vertical_scrollbar",
        "6b140a728f0b50e41f7666c0bf00cddcc2fcdf60f1f1822ac79b1981f4135e6d",
    ),
    (
        LIGHT_SCROLLBAR,
        "textual.widget:Widget.horizontal_scrollbar",
        "98aa628a9013eb5a1fa4797af25d49e2f96dc9a81cb51188d6071fad8331ea1a",
    ),
    (
        LIGHT_SCROLLBAR,
        "textual.scrollbar:ScrollBarRender.__rich_console__",
        "39854fc82928d6470e7b2a6341512cdf6050202ccea7f1e69a6c3c726549ddf3",
    ),
    (
        SCROLL_UPDATE,
        "textual.widget:Widget._scroll_update",
        "edb9f6257285830d14f94d0a27212a96275f14e21ae80350c6a7ce562628b7b8",
    ),
]


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
    table = KeyedTable([("n", "n")])
    async with OneApp(table).run_test(size=(40, 12)) as pilot:
        table.sync([(str(i), (str(i),)) for i in range(40)])
        await pilot.pause()
        # painted-lines: none (public Line API only)
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


def test_the_guard_names_the_trick_and_the_way_back():  # the checks above must be able to fail
    with pytest.raises(AssertionError, match=r"light-scrollbar: .*CHECKPOINT_TUI_STOCK=light-scrollbar"):
        need(LIGHT_SCROLLBAR, object(), "_vertical_scrollbar")
    with pytest.raises(AssertionError, match=r"painted-lines: the source of .* changed"):
        check_upstream(PAINTED_LINES, "textual.widget:Widget.render_lines", "0" * 64)
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
    assert switch.parse(" scroll-update,LIGHT-SCROLLBAR ") == {SCROLL_UPDATE, LIGHT_SCROLLBAR}
    with pytest.raises(UsageError, match="no trick named light-scrollbars "):
        switch.parse("light-scrollbars")


def test_the_environment_is_read_when_the_tui_is_imported():
    code = "from checkpoint_tui.tui.render import switch; print(','.join(sorted(switch.OFF)))"
    for value, off in (("all", ",".join(sorted(TRICKS))), ("scroll-update", "scroll-update"), ("", "")):
        env = {**os.environ, "CHECKPOINT_TUI_STOCK": value}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == off, out.stderr


def test_a_typo_in_the_switch_is_a_usage_error_before_anything_starts(tmp_path):
    env = {**os.environ, "CHECKPOINT_TUI_STOCK": "painted-lines,nope"}
    out = subprocess.run(
        [sys.executable, "-m", "checkpoint_tui", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2 and "CHECKPOINT_TUI_STOCK: no trick named nope" in out.stderr
    assert not (tmp_path / "run" / "temporal.db").exists()


# --- the stock path ----------------------------------------------------------------------------------


def forbid(monkeypatch, cls: type, name: str, trick: str) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError(f"{trick} ran on the stock path ({cls.__name__}.{name})")

    monkeypatch.setattr(cls, name, refuse)


async def settled(app, pilot) -> None:
    """The scrollbars as the next refresh leaves them: scroll-update tells them a table's size at most
    once a second, so on a loaded machine a screenshot could otherwise catch them a size behind the
    stock path's (which told them in the layout pass)."""
    for table in app.query(KeyedTable):
        table.update_bars()
    await pilot.pause()


async def screens_of(view) -> tuple[set[type], list[str]]:
    """The app on fixed data: its tables' scrollbar classes, and its screen as SVG, then with the
    history scrolled to the top."""
    app = CheckpointApp(FixedSession(view), poll_interval=3600)
    app.animation_level = "none"
    shots = []
    async with app.run_test(size=(160, 44)) as pilot:
        for _ in range(100):
            if app.session.polls:
                break
            await pilot.pause(0.02)
        await pilot.pause()
        await settled(app, pilot)
        shots.append(app.export_screenshot())
        app.query_one("#history").scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        await settled(app, pilot)
        shots.append(app.export_screenshot())
        bars = {type(bar) for t in app.query(KeyedTable) for bar in (t.vertical_scrollbar, t.horizontal_scrollbar)}
    return bars, shots


@pytest.mark.parametrize("view", [running_view, after_kill_view, completed_after_kill_view])
async def test_on_the_stock_path_the_app_is_stock_textual_and_paints_the_same(view, monkeypatch, utc):
    monkeypatch.setattr(switch, "OFF", frozenset())
    bars, with_tricks = await screens_of(view())
    assert bars == {LightScrollBar}  # the tricks path is the tricks path
    monkeypatch.setattr(switch, "OFF", frozenset(TRICKS))
    for cls, name, trick in (
        (PaintedLines, "_styled_by_textual", PAINTED_LINES),
        (LightBars, "_make_bar", LIGHT_SCROLLBAR),
        (LightScrollBar, "render_lines", LIGHT_SCROLLBAR),
        (QuietVirtualSize, "_tell_bars", SCROLL_UPDATE),
    ):
        forbid(monkeypatch, cls, name, trick)
    bars, stock = await screens_of(view())
    assert bars == {ScrollBar}
    assert stock == with_tricks  # every cell, every colour
