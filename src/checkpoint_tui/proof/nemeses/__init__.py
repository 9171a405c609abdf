"""Nemeses: what breaks a run (process kills and pauses, partitions, workflow and activity resets)
and where it lands."""
