"""quiet-input-thread: Textual's Linux driver, with an input thread that sleeps until there is input.

Textual's input thread wakes ten times a second to look for keys, whether any came or not, and a
wake-up is not free (least of all on an otherwise idle machine): an app that should idle near zero
spent a visible share of its CPU there. This thread waits on the terminal and on a pipe that the
exit event writes to; it wakes on a timer only while a lone ESC waits to be told apart from the start
of an escape sequence (the parser's timeout, which is what Textual's 0.1 s tick is for).

run_input_thread follows Textual 8.2.8's own (pinned in pyproject.toml), with those two changes; the
guard test holds a hash of that upstream source. docs/upstream-textual-input-thread.md is the same
change written up for Textual, so that this copy can go once Textual takes it.

Private names: textual._loop.loop_last, textual._parser.ParseError, textual._xterm_parser.XTermParser,
the parser's _timeout_time (set while a lone ESC waits), LinuxDriver._debug."""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from codecs import getincrementaldecoder

from textual._loop import loop_last
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

ESC_TICK_S = 0.1  # while the parser waits for the rest of an escape sequence (Textual's tick)
IDLE_WAIT_S = 5.0  # otherwise: input and the exit event both wake the thread at once


class _WakingEvent(threading.Event):
    """The driver's exit event: setting it also wakes the input thread (a byte down its pipe, while it
    has one: the thread makes the pipe when it starts and closes it when it ends, so a suspend and
    resume, which ends one input thread and starts another, gets a fresh pipe)."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.wake_fd: int | None = None  # the running input thread's pipe, write end

    def set(self) -> None:
        super().set()
        with self.lock:
            if self.wake_fd is not None:
                with contextlib.suppress(BlockingIOError):  # full: already woken
                    os.write(self.wake_fd, b"x")


class QuietLinuxDriver(LinuxDriver):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.exit_event: _WakingEvent = _WakingEvent()

    def run_input_thread(self) -> None:
        """Wait for input (or the exit event) and dispatch events."""
        event = self.exit_event
        with event.lock:
            wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            event.wake_fd = wake_w
        try:
            self._read_input(wake_r)
        finally:
            with event.lock:
                event.wake_fd = None
                os.close(wake_r)
                os.close(wake_w)

    def _read_input(self, wake_r: int) -> None:
        selector = selectors.SelectSelector()  # as Textual: select(2) on the terminal
        fileno = self.fileno
        selector.register(fileno, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        feed, tick = parser.feed, parser.tick
        decode = getincrementaldecoder("utf-8")().decode

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> None:
            for last, (key, mask) in loop_last(events):
                if key.fd == wake_r:
                    with contextlib.suppress(OSError):
                        os.read(wake_r, 64)
                    continue
                if mask & selectors.EVENT_READ:
                    data = decode(os.read(fileno, 1024 * 4), final=final and last)
                    if not data:  # stdin piped
                        break
                    for event in feed(data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        def wait() -> float:
            return ESC_TICK_S if parser._timeout_time is not None else IDLE_WAIT_S

        try:
            while not self.exit_event.is_set():
                process(selector.select(wait()))
            selector.unregister(fileno)
            process(selector.select(0.1), final=True)
        finally:
            selector.close()
            try:  # as Textual: end the parser's input (its generator finishes; what it held is dropped)
                for _event in feed(""):
                    pass
            except (EOFError, ParseError):
                pass
