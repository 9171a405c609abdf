"""The durable record (SQLite), shared by the worker and the app processes."""
