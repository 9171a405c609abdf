"""The TUI's paint tricks that go round Textual's stock paths, each behind a switch back to it: the
only place in the package that touches a Textual private name (tests hold it so).

painted-lines (painted_lines.py) and light-scrollbar (light_scrollbar.py) are mixins of KeyedTable's,
scroll-update (scroll_update.py) too. CHECKPOINT_TUI_STOCK=1 (or `all`) runs the app on public Textual
only; a comma-separated list of trick names (switch.TRICKS) switches off just those, as
bench/tui_tick.py does to measure what each buys. docs/tui-render.md has the tricks, what each was
measured to buy, and what an upgrade of Textual needs."""
