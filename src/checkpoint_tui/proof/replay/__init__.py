"""Replay: recorded histories and the replay of them on the current code."""
