"""Measure: figures measured on runs (doctor --measure, compare, workflow task cost)."""
