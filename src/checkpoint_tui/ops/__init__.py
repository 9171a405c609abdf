"""Process control without Textual: identity-checked pids, the dev server, the worker supervisor."""
