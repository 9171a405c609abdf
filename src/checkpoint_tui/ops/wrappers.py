"""A worker command run through a wrapper (`npm run worker`, `npx …`, `yarn …`, `uv run …`,
`sh -c "…; …"`): the process the lab starts is not the one that polls Temporal. The Temporal identity
that polls (the SDK's default, `pid@host`) is the wrapper's own descendant that is not a wrapper, once
there is exactly one such topmost process. A command whose own process is the worker (python, node, or
a wrapper that exec'd it: `env VAR=1 python w.py`, a one-command `sh -c`) keeps its own pid, and a
worker that forks children of its own is never mistaken for its children: only a wrapper is followed."""

from __future__ import annotations

from pathlib import Path

import psutil

from checkpoint_tui.ops import worker_proc
from checkpoint_tui.ops.user_worker import default_identity
from checkpoint_tui.ops.worker_proc import WorkerProc
from checkpoint_tui.settings import Settings

# Program names (the command line's first word; npm titles its node process `npm run worker`)
WRAPPERS = frozenset({"npm", "npx", "yarn", "pnpm", "sh", "bash", "dash", "zsh", "env", "uv", "poetry", "pipenv"})
MAX_DESCENDANTS = 200  # a wrapper's tree larger than this is not walked: its worker stays unfollowed


def is_wrapper(cmdline: list[str] | tuple[str, ...]) -> bool:
    """A wrapper's command line. npm's node process retitles itself: its command line is then one
    string, `npm run worker`, whose first word is the program."""
    words = cmdline[0].split() if cmdline and cmdline[0] else []
    return bool(words) and Path(words[0]).name in WRAPPERS


def polling_pid(pid: int) -> int | None:
    """The process that polls for the process `pid`: itself unless it is a wrapper; then its one topmost
    descendant that is not a wrapper (None while there is none, or more than one)."""
    try:
        root = psutil.Process(pid)
        if not is_wrapper(root.cmdline()):
            return pid
        tree = root.children(recursive=True)[:MAX_DESCENDANTS]
        wrappers = {pid} | {p.pid for p in tree if is_wrapper(p.cmdline())}
        top = [p.pid for p in tree if p.pid not in wrappers and p.ppid() in wrappers]
    except psutil.Error:  # gone meanwhile: nothing to follow
        return None
    return top[0] if len(top) == 1 else None


def follow(settings: Settings, worker: WorkerProc) -> bool:
    """Give a user's wrapped worker command the identity of the process that polls (on disk too, for the
    processes that adopt it); True once it has it (at once for a command that is not wrapped)."""
    if not worker.user_cmd:
        return True
    pid = polling_pid(worker.pid)
    if pid is None:
        return False
    name = default_identity(pid)
    if name != worker.name:
        worker.name = name
        worker_proc.save(settings, worker)
    return True
