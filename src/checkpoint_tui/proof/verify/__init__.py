"""Verify: the --verify harness and the scenarios of each workload."""
