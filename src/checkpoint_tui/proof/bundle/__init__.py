"""Proof bundles: a directory a CI job keeps, holding the report, its JUnit, the runs' histories and a
README that says how to check each claim again."""
