"""Exactly-once keys for agent frameworks on Temporal, for user code to import: the only place in
`checkpoint_tui` that may touch a framework, and only lazily (importing this package imports none)."""
