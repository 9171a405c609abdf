"""checkpoint_tui.lab: `chaos`, `--verify` and `doctor` of a home from Python, returning what they found.

    from checkpoint_tui.lab import Lab, assert_passed

    with Lab("/tmp/lab-home") as lab:
        result = lab.chaos(worker_cmd="python worker.py", workflow="MailerGuarded", input={"turns": 6},
                           aim="tool", seed=3, kills=4)
        assert_passed(result)  # AssertionError: the audit's verdict, naming each tool call at risk

Each call runs the CLI itself (`python -m checkpoint_tui --home HOME ... chaos ...`, through
lab/bound.py: the kernel ends it if the caller dies) in a process of its own session: one engine, and
the CLI's process-wide parts (its exit skips interpreter finalisation; chaos signals whole process
groups) never touch the caller. The result is read back from the report the command wrote (the
durable artifact, as the CLI's own screens read it), not from its printed text; what it printed is in
HOME/lab/NAME.log. `close()` (or leaving the `with`, or the interpreter's exit) runs `stop` on the
home: the dev server, workers, spares and supervisors end, also after a failure, a timeout or
KeyboardInterrupt. A Lab's home should be its own: `stop` ends whatever that home runs.
"""

from checkpoint_tui.lab.api import Lab
from checkpoint_tui.lab.result import Check, LabError, Result, assert_passed

__all__ = ["Check", "Lab", "LabError", "Result", "assert_passed"]
