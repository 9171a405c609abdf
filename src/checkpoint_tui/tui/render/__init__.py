"""The TUI's paint and driver tricks on Textual's private internals, each behind a switch to Textual's
stock path: the only place in the package that touches a Textual private name (tests hold it so).

CHECKPOINT_TUI_STOCK=1 (or `all`) runs the app on public Textual only; a comma-separated list of trick
names (switch.TRICKS) switches off just those, as bench/tui_tick.py does to measure what each buys.
docs/tui-render.md has the tricks, what each was measured to buy, and what an upgrade of Textual needs."""

from __future__ import annotations

from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

from checkpoint_tui.tui.render.quiet_driver import QuietLinuxDriver
from checkpoint_tui.tui.render.steady import SteadyFooter, SteadyHorizontal, SteadyScreen, SteadyVertical
from checkpoint_tui.tui.render.switch import QUIET_INPUT_THREAD, STEADY_LINES, TRICKS, on

__all__ = ["TRICKS", "driver_class", "footer", "horizontal", "on", "screen", "vertical"]


def screen(**kwargs) -> Screen:
    return (SteadyScreen if on(STEADY_LINES) else Screen)(**kwargs)


def horizontal(*children: Widget, **kwargs) -> Horizontal:
    return (SteadyHorizontal if on(STEADY_LINES) else Horizontal)(*children, **kwargs)


def vertical(*children: Widget, **kwargs) -> Vertical:
    return (SteadyVertical if on(STEADY_LINES) else Vertical)(*children, **kwargs)


def footer(**kwargs) -> Footer:
    return (SteadyFooter if on(STEADY_LINES) else Footer)(**kwargs)


def driver_class(chosen: type[Driver]) -> type[Driver]:
    """The driver to run the app with, given the one Textual chose (only its Linux driver has a quieter
    input thread; a headless or web driver is left as it is)."""
    return QuietLinuxDriver if chosen is LinuxDriver and on(QUIET_INPUT_THREAD) else chosen
