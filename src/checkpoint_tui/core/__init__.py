"""What the TUI and the headless commands drive, with no Textual in it: the lab session, snapshots of a
run from durable data, Temporal history, starting and waiting for runs."""
