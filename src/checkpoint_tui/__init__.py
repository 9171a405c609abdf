"""checkpoint-tui: a terminal chaos lab for durable AI-agent execution."""

__version__ = "0.1.0"
