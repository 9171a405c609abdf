"""One module per pane."""
