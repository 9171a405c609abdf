"""A worker command that daemonizes a child before it serves (forks; the child leaves the process
group in a session of its own, forks again and lives on; the first fork exits), then execs the
example project's worker. `stop` must end the daemon too: it carries the worker spawn's environment."""

import os
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_worker" / "worker.py"

first = os.fork()
if first == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(600)  # the daemon
    os._exit(0)
os.waitpid(first, 0)
os.execv(sys.executable, [sys.executable, str(EXAMPLE)])
