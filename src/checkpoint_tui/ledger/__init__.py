"""The durable record shared by the worker and the app processes: SQLite by default, PostgreSQL for
several hosts. Every SQL statement of the project lives in this package: writes in `store`, `effects`
and `faults`, reads in `queries` (callers get dataclasses from `rows`, never cursors)."""
