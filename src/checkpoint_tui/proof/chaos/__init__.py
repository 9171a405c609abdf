"""Chaos: the engine, its targets (one per workload), schedules, shrinking, coverage, kill windows."""
