"""Entry point of the worker process: `python -m checkpoint_tui.worker ...` (see loop_worker/worker.py)."""

from checkpoint_tui.loop_worker.worker import main

if __name__ == "__main__":
    main()
