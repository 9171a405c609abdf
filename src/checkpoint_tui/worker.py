"""Entry point of the worker process: `python -m checkpoint_tui.worker ...` (see engine/worker.py)."""

from checkpoint_tui.engine.worker import main

if __name__ == "__main__":
    main()
