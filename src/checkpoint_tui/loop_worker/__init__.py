"""Runs inside the worker process: the workflow, its activities and the worker entry point."""
