"""The preloaded spare's parent, run by path in the user's own Python (it imports nothing of ours):

    PYTHON [FLAGS] preloader.py --ready FILE -- PYTHON [FLAGS] (SCRIPT | -m MODULE) [ARGS...]

It imports what the worker command's script (or module) imports at its top level, without running
the script itself, so the expensive part of a cold start (importing the agent framework and the SDK)
is done once. Then, if it is still the only thread of its process (a thread started at import would
be missing from a fork: a lock it held stays held forever in the child), it says so in FILE and waits.
Each SIGUSR1 forks a child that starts a session of its own, writes its pid to FILE + ".child", and
runs the script as `__main__` with its argv, exactly as `PYTHON SCRIPT ARGS` would from that point;
how each child ended (it reaps them) goes to FILE + ".exits".
The supervisor records the child as the slot's worker; the preloader stays, ready for the next one.

What a worker imports later than its script's top level (a plugin's lazy imports when the worker is
built, a tool's on its first call) a fork would still import after a kill. So each fork, LEARN_AT
seconds after it started, writes the names in its `sys.modules` to FILE + ".learned" and sends the
preloader SIGUSR2; the preloader imports the new ones first in a trial fork (which exits saying
whether a thread was left running) and, if none was, itself: the next fork starts with them.

Its command line ends with the worker command, so the supervisor's identity checks match it and its
children as they match a cold start. FILE holds one JSON object: {"ok": true, "modules": N,
"seconds": S} or {"ok": false, "reason": "..."} (then the preloader exits: replacements are cold).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # this file's folder (ours) is no place for the user's imports to come from
    sys.path.pop(0)

import ast  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import runpy  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import time  # noqa: E402

# Interpreter flags taken before the script; any other (-c, -X, -W ...) makes the command cold-start only.
FLAGS = frozenset({"-u", "-B", "-O", "-OO", "-s", "-E", "-q", "-b", "-bb"})
MAX_SOURCE = 1 << 20  # a script larger than this is not read for its imports
MAX_IMPORTS = 500
SIGNALS = {signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
LEARN_AT = (1.0, 3.0, 10.0, 30.0)  # seconds after a fork starts: built and polling, then past its first tasks
MAX_LEARNED = 5000  # module names read from a fork's list
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,20}")
TRIAL_CLEAN, TRIAL_THREADS = 0, 3
TRIAL_S = 30.0  # a trial whose imports take longer (or hang) is killed: nothing learned


def parse(cmd: list[str]) -> tuple[str | None, str | None, list[str]]:
    """(script path or None, module name or None, argv the program sees) of `PYTHON [FLAGS] ...`;
    raises ValueError naming what cannot be preloaded."""
    rest = list(cmd[1:])
    while rest and rest[0] in FLAGS:
        rest.pop(0)
    if len(rest) >= 2 and rest[0] == "-m":
        return None, rest[1], [rest[1], *rest[2:]]
    if not rest or rest[0].startswith("-"):
        raise ValueError(f"not `python SCRIPT` or `python -m MODULE` ({' '.join(cmd[1:3])[:80]})")
    return rest[0], None, rest


def top_level_imports(tree: ast.Module) -> list[str]:
    """Module names the code imports outside any function or class body (those run at import)."""
    names: list[str] = []
    todo: list[ast.AST] = list(tree.body)
    while todo and len(names) < MAX_IMPORTS:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
        else:
            todo += [c for c in ast.iter_child_nodes(node) if isinstance(c, (ast.stmt, ast.excepthandler))]
    return names


def source_of(script: str | None, module: str | None) -> tuple[bytes, str]:
    """(source text, file) of the script or the module, read without running it."""
    if module is not None:
        import importlib.util

        sys.path.insert(0, os.getcwd())  # as `python -m` does
        spec = importlib.util.find_spec(module)
        path = spec.origin if spec is not None else None
        if not path or not path.endswith(".py"):
            raise ValueError(f"module {module[:80]} has no Python source to read")
    else:
        assert script is not None
        path = script
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` does
    with open(path, "rb") as f:
        data = f.read(MAX_SOURCE + 1)
    if len(data) > MAX_SOURCE:
        raise ValueError(f"{path[-80:]} is over {MAX_SOURCE} bytes")
    return data, path


PATH_CALLS = ("sys.path.insert", "sys.path.append", "sys.path.extend")


def run_top_level_setup(tree: ast.Module, path: str) -> None:
    """Run the script's top-level imports and sys.path changes, in its order and nothing else: a
    script that puts a folder on sys.path before importing from it (every example here does) gets
    those imports preloaded too. A statement that fails is skipped, as in preload()."""
    ns: dict[str, object] = {"__name__": "__preload__", "__file__": os.path.abspath(path)}
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
        path_call = call is not None and ast.unparse(call.func) in PATH_CALLS
        if isinstance(node, (ast.Import, ast.ImportFrom)) or path_call:
            with contextlib.suppress(Exception):  # as the import would fail when the script runs
                exec(compile(ast.Module([node], []), path, "exec"), ns)  # noqa: S102 - the user's own line


def preload(names: list[str]) -> int:
    """Import each name (a submodule of a `from X import Y` only where Y is one); a failing import is
    skipped: the script meets the same error when it runs, and says it in its log."""
    import importlib

    done = 0
    for name in names:
        parent, _, leaf = name.rpartition(".")
        if parent and parent in sys.modules and hasattr(sys.modules[parent], leaf):
            continue  # `from X import Y` where Y is a name, not a module
        try:
            importlib.import_module(name)
            done += 1
        except Exception:  # noqa: BLE001 - ImportError and whatever a module raises at import
            pass
    return done


def other_threads() -> list[str]:
    """The threads besides this one: Python's by name, native ones (in /proc, not in Python's list)
    counted."""
    import threading

    named = [t.name[:32] for t in threading.enumerate() if t is not threading.current_thread()]
    try:
        native = len(os.listdir("/proc/self/task")) - 1 - len(named)
    except OSError:
        native = 0
    return named + ([f"{native} native"] if native > 0 else [])


def say(path: str, data: dict) -> None:
    """Write FILE atomically, never through a link planted at its temporary name."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def become(script: str | None, module: str | None, argv: list[str], ready: str, mask: set[int]) -> None:
    """The forked child: a session of its own (the supervisor signals a worker's process group), its
    pid said, then the program as `python ...` would run it."""
    os.setsid()
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    say(ready + ".child", {"pid": os.getpid()})
    import threading  # after the fork: the preloader itself stays single-threaded

    threading.Thread(target=tell_modules, args=(ready, os.getppid()), name="preload-learn", daemon=True).start()
    sys.argv = argv
    if module is not None:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    elif script is not None:
        runpy.run_path(script, run_name="__main__")
    sys.exit(0)


def tell_modules(ready: str, preloader: int) -> None:
    """In a fork: at each of LEARN_AT, the modules it has imported (in their order) to the preloader."""
    started = time.monotonic()
    for at in LEARN_AT:
        time.sleep(max(0.0, at - (time.monotonic() - started)))
        if os.getppid() != preloader:
            return  # the preloader is gone: nobody to tell
        with contextlib.suppress(OSError):
            say(f"{ready}.learned", {"modules": [m for m in list(sys.modules) if not m.startswith("__")]})
            os.kill(preloader, signal.SIGUSR2)


def learn(ready: str, said: dict) -> None:
    """Import what a fork imported that this process has not, if a trial fork shows the imports leave
    no thread running (counted in FILE: "learned", or "not_learned" when they do); if one appears here
    anyway, say so and exit (replacements start cold)."""
    told = read_bounded(f"{ready}.learned")
    names = told.get("modules") if isinstance(told, dict) else None
    if not isinstance(names, list):
        return
    new = [n for n in names[:MAX_LEARNED] if isinstance(n, str) and MODULE_NAME.fullmatch(n) and n not in sys.modules]
    if not new:
        return
    trial = os.fork()
    if trial == 0:
        preload(new)
        os._exit(TRIAL_THREADS if other_threads() else TRIAL_CLEAN)
    if not trial_clean(trial):  # they start a thread (or hang, or broke the trial): a fork imports them
        said["not_learned"] = said.get("not_learned", 0) + len(new)
        say(ready, said)
        return
    said["learned"] = said.get("learned", 0) + preload(new)
    if threads := other_threads():
        reason = f"thread(s) running after a worker's later imports ({', '.join(threads[:5])})"
        say(ready, {"ok": False, "reason": reason})
        os._exit(0)
    say(ready, said)


def trial_clean(pid: int) -> bool:
    """Whether the trial fork exited saying its imports left no thread, within TRIAL_S (else killed)."""
    deadline = time.monotonic() + TRIAL_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == TRIAL_CLEAN
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False


def read_bounded(path: str) -> object:
    """A JSON file a fork wrote, read without following a link or waiting on a FIFO (only a regular
    file is read), at most MAX_SOURCE bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(MAX_SOURCE + 1)
    try:
        return json.loads(data) if len(data) <= MAX_SOURCE else None
    except (ValueError, RecursionError):  # not JSON, or nested too deep to parse
        return None


def reap(exits: str) -> None:
    """Reap every child that ended and append how to `exits` (a line each: pid, signal, exit code): the
    supervisor is not their parent, so this is the only place their exit status can be seen."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        try:  # a FIFO planted there is neither waited on (O_NONBLOCK) nor written to
            fd = os.open(exits, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        except OSError:
            continue
        with os.fdopen(fd, "a") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                f.write(json.dumps({"pid": pid, "signal": sig, "code": code}) + "\n")


def serve(script: str | None, module: str | None, argv: list[str], ready: str, said: dict, mask: set[int]) -> None:
    """Wait for SIGUSR1 (fork a child), SIGCHLD (reap), or an end signal (exit: the children are the
    pool's workers now and stay); `mask`: the signal mask a fork gets back."""
    while True:
        sig = signal.sigwaitinfo(SIGNALS).si_signo
        if sig == signal.SIGCHLD:
            reap(ready + ".exits")
        elif sig == signal.SIGUSR1:
            if os.fork() == 0:
                become(script, module, argv, ready, mask)
        elif sig == signal.SIGUSR2:
            learn(ready, said)
        else:
            os._exit(0)


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 4 or args[0] != "--ready" or args[2] != "--":
        sys.exit("usage: preloader.py --ready FILE -- PYTHON [FLAGS] (SCRIPT | -m MODULE) [ARGS...]")
    ready, cmd = args[1], args[3:]
    started = time.monotonic()
    try:
        script, module, argv = parse(cmd)
        source, path = source_of(script, module)
        tree = ast.parse(source, path)
        names = top_level_imports(tree)
    except (ValueError, OSError, SyntaxError, ImportError) as err:
        say(ready, {"ok": False, "reason": f"cannot read its imports: {str(err)[:200]}"})
        return
    sys.argv = argv  # what a module reading sys.argv at import would see
    run_top_level_setup(tree, path)
    modules = preload(names)
    threads = other_threads()
    if threads:
        reason = f"thread(s) running after its imports ({', '.join(threads[:5])}): a fork would lose them"
        say(ready, {"ok": False, "reason": reason})
        return
    said = {"ok": True, "modules": modules, "seconds": round(time.monotonic() - started, 3)}
    # Blocked before "ready" is said: a SIGUSR1 sent the moment the file appears would otherwise meet
    # its default action and end the preloader (seen once in a loaded suite: no fork within 30 s).
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    say(ready, said)
    serve(script, module, argv, ready, said, mask)


if __name__ == "__main__":
    main()
