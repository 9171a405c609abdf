"""The preloaded spare of a user's Python worker command (ops/preload.py, ops/preloader.py): which
commands get one, what the preloader imports, a thread at import turning it off (said in a worker
event, replacements cold), a kill replaced by a fork that polls, and nothing left after the stop."""

from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import connect
from checkpoint_tui.ops.preload import SCRIPT, not_preloadable
from checkpoint_tui.ops.preloader import top_level_imports
from checkpoint_tui.ops.user_polling import wait_polling
from checkpoint_tui.settings import Settings
from checkpoint_tui.waiting import wait_until, wait_until_sync
from conftest import alive, supervised

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_worker" / "worker.py"
# A library that starts a thread when imported (a metrics exporter, a connection pool's reaper...)
THREAD_LIB = (
    "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True, name='reaper').start()\n"
)


def test_a_script_s_top_level_imports_are_read_and_nothing_else():
    source = """
import os, json as j
from a.b import c, d
from . import sibling
try:
    import fast
except ImportError:
    import slow
def f():
    import inside_function
class K:
    import inside_class
if __name__ == "__main__":
    import main_only
"""
    names = top_level_imports(ast.parse(source))
    assert sorted(names) == sorted(["os", "json", "a.b", "a.b.c", "a.b.d", "fast", "slow", "main_only"])


@pytest.mark.parametrize(
    ("cmd", "why"),
    [
        (("/usr/bin/python3", "w.py"), None),
        (("python3.11", "-u", "-B", "w.py", "--flag"), None),
        (("python", "-m", "pkg.worker"), None),
        (("node", "w.js"), "not a Python command"),
        (("python", "-c", "import w"), "not `python SCRIPT`"),
        (("python", "-X", "dev", "w.py"), "not `python SCRIPT`"),
        (("python",), "not `python SCRIPT`"),
    ],
)
def test_which_worker_commands_get_a_preloaded_spare(cmd: tuple[str, ...], why: str | None):
    found = not_preloadable(cmd)
    assert found == why if why is None else found is not None and found.startswith(why)


def _preloader(tmp_path: Path, script: Path) -> tuple[subprocess.Popen, Path]:
    ready = tmp_path / "p.ready"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--ready", str(ready), "--", sys.executable, str(script)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return proc, ready


def test_a_thread_started_at_import_turns_the_preloader_off_saying_which(tmp_path: Path):
    (tmp_path / "threadlib.py").write_text(THREAD_LIB)
    script = tmp_path / "worker.py"
    script.write_text("import threadlib\nraise SystemExit('the script itself must not run in the preloader')\n")
    proc, ready = _preloader(tmp_path, script)
    try:
        assert proc.wait(timeout=30) == 0  # it says why and exits: nothing to fork from
    finally:
        proc.kill()
    said = json.loads(ready.read_text())
    assert said["ok"] is False and "thread(s) running after its imports (reaper)" in said["reason"]


def test_a_fork_runs_the_script_as_main_in_a_session_of_its_own(tmp_path: Path):
    (tmp_path / "lib.py").write_text("LOADED = 1\n")
    script = tmp_path / "worker.py"
    out = tmp_path / "out.json"
    script.write_text(
        "import json, os, sys\nimport lib\n"
        "ran = {'argv': sys.argv, 'main': __name__, 'sid': os.getsid(0), 'pid': os.getpid()}\n"
        f"with open({str(out)!r} + '.tmp', 'w') as f:\n    json.dump(ran, f)\n"
        f"os.replace({str(out)!r} + '.tmp', {str(out)!r})\n"
    )
    proc, ready = _preloader(tmp_path, script)
    try:
        assert wait_until_sync(ready.exists, 30)
        assert json.loads(ready.read_text())["ok"] is True
        assert not out.exists()  # the script's body did not run in the preloader
        proc.send_signal(signal.SIGUSR1)  # a fork
        assert wait_until_sync(out.exists, 10)
        ran = json.loads(out.read_text())
        assert ran["main"] == "__main__" and ran["argv"] == [str(script)]
        assert ran["sid"] == ran["pid"] != proc.pid  # a session of its own: a group kill spares the preloader
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_fork_asked_for_the_moment_ready_is_said_is_not_the_preloaders_end(tmp_path: Path):
    """The preloader paused right after its ready file appears (a loaded machine's preemption there,
    made certain by a sitecustomize that sleeps after that rename): a SIGUSR1 sent then waits for it,
    rather than meeting the default action that ends the process."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(
        "import os, time\n_replace = os.replace\n"
        "def replace(src, dst, *a, **k):\n    _replace(src, dst, *a, **k)\n"
        "    if str(dst).endswith('p.ready'):\n        time.sleep(1.0)\n"
        "os.replace = replace\n"
    )
    script = tmp_path / "worker.py"
    script.write_text(f"open({str(tmp_path / 'ran')!r}, 'w').close()\n")
    ready = tmp_path / "p.ready"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--ready", str(ready), "--", sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until_sync(ready.exists, 30)
        proc.send_signal(signal.SIGUSR1)  # inside the second the preloader sleeps after saying ready
        assert wait_until_sync(lambda: (tmp_path / "ran").exists(), 30), proc.poll()
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_a_folder_the_script_puts_on_sys_path_is_where_its_imports_are_preloaded_from(tmp_path: Path):
    (tmp_path / "shared").mkdir()
    marker = tmp_path / "imported"
    (tmp_path / "shared" / "heavy.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    script = tmp_path / "app" / "worker.py"
    script.parent.mkdir()
    script.write_text(
        "import sys\nfrom pathlib import Path\n"
        "sys.path.insert(1, str(Path(__file__).resolve().parent.parent / 'shared'))\n"
        "import heavy\nraise SystemExit('the script itself must not run in the preloader')\n"
    )
    proc, ready = _preloader(tmp_path, script)
    try:
        assert wait_until_sync(ready.exists, 30)
        assert json.loads(ready.read_text())["ok"] is True and marker.exists()
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _lazy_worker(tmp_path: Path, lib_source: str) -> tuple[Path, Path]:
    """A script that imports `lazylib` only when it runs (as a plugin does when it builds a worker),
    then stays up; lazylib notes each pid that imports it."""
    pids = tmp_path / "imported-by"
    note = f"import os\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
    (tmp_path / "lazylib.py").write_text(note + lib_source)
    script = tmp_path / "worker.py"
    script.write_text(
        "import os, time\ndef main():\n    import lazylib\n"
        f"    open({str(tmp_path / 'ran')!r}, 'a').write(f'{{os.getpid()}}\\n')\n    time.sleep(600)\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    return script, pids


def _child_pid(ready: Path) -> int:
    try:
        return json.loads(ready.with_name(ready.name + ".child").read_text())["pid"]
    except (OSError, ValueError):
        return 0


def _importers(pids: Path) -> list[int]:
    return [int(line) for line in pids.read_text().split()] if pids.exists() else []


@pytest.mark.parametrize("starts_thread", [False, True], ids=["plain", "thread-at-import"])
def test_what_a_fork_imports_later_the_preloader_imports_for_the_next_unless_it_starts_a_thread(
    tmp_path: Path, starts_thread: bool
):
    script, pids = _lazy_worker(tmp_path, THREAD_LIB if starts_thread else "")
    proc, ready = _preloader(tmp_path, script)
    forks: list[int] = []
    try:
        assert wait_until_sync(ready.exists, 30)
        assert proc.pid not in _importers(pids)  # not a top-level import: the script's main runs it
        proc.send_signal(signal.SIGUSR1)
        assert wait_until_sync(lambda: len(_importers(pids)) >= 1, 30)  # a loaded machine's fork and import
        forks.append(_importers(pids)[0])
        # the fork says what it imported (LEARN_AT); a trial fork imports it first, then the preloader
        key = "not_learned" if starts_thread else "learned"
        assert wait_until_sync(lambda: key in json.loads(ready.read_text()), 30)
        said, importers = json.loads(ready.read_text()), _importers(pids)
        assert said["ok"] is True and said[key] >= 1 and proc.poll() is None  # still a spare either way
        assert len(importers) == (2 if starts_thread else 3) and importers[0] == forks[0]
        assert (importers[-1] == proc.pid) is not starts_thread  # the trial's import, then (clean) the preloader's
        proc.send_signal(signal.SIGUSR1)  # the next fork: it imports lazylib only where the preloader did not
        assert wait_until_sync(lambda: (tmp_path / "p.ready.child").exists() and _child_pid(ready) not in forks, 10)
        forks.append(_child_pid(ready))
        assert wait_until_sync(lambda: forks[1] in _importers(tmp_path / "ran"), 10)  # its main ran past the import
        assert (forks[1] in _importers(pids)) is starts_thread
    finally:
        for pid in forks:
            psutil.Process(pid).kill()
        proc.kill()
        proc.wait(timeout=10)


def _settings(home: Settings, tmp_path: Path, cmd: tuple[str, ...]) -> Settings:
    return replace(home, worker_cmd=cmd, worker_cwd=tmp_path, task_queue_name=f"preload-{home.home.name}")


def _events(settings: Settings, kind: str) -> list:
    return [e for e in queries.worker_events(connect(settings.ledger), None, 200) if e.event == kind]


async def test_a_killed_worker_is_replaced_by_a_fork_that_polls_and_stop_leaves_nothing(
    home: Settings, tmp_path: Path, temporal_address: str
):
    settings = _settings(home, tmp_path, (sys.executable, str(EXAMPLE)))
    async with supervised(settings, temporal_address) as (sup, client):
        await wait_until(lambda: bool(_events(settings, "preload")), 60, what="the preloader ready")
        assert _events(settings, "preload")[0].detail.startswith("ready (")
        assert sup.preloads is not None
        preloader = sup.preloads.live[0]
        old = sup.primary
        assert old is not None and psutil.Process(old.pid).ppid() == preloader.pid  # the first worker too
        first = _events(settings, "spawn")[-1]
        assert (first.pid, first.detail) == (old.pid, f"active worker (slot 0, forked from preloader {preloader.pid})")
        await wait_polling(client, settings, old)
        await sup.kill(worker=old)
        await wait_until(lambda: sup.primary is not None and sup.primary.pid != old.pid, 10, what="a replacement")
        new = sup.primary
        promoted = _events(settings, "promote")[-1]
        assert promoted.pid == new.pid
        assert f"replaces {old.pid} (forked from preloader {preloader.pid}" in (promoted.detail or "")
        assert psutil.Process(new.pid).ppid() == preloader.pid
        await wait_polling(client, settings, new, timeout=10)
        assert not _events(settings, "respawn")  # no cold start
    gone = [preloader.pid, new.pid]
    assert wait_until_sync(lambda: not any(alive(p) for p in gone), 10)
    assert not list(settings.run_dir.glob("preloader-*.json"))


async def test_a_thread_at_import_means_cold_replacements_and_an_event_saying_why(
    home: Settings, tmp_path: Path, temporal_address: str
):
    (tmp_path / "threadlib.py").write_text(THREAD_LIB)
    wrapper = tmp_path / "worker.py"
    wrapper.write_text(
        f"import threadlib\nimport runpy, sys\nsys.path.insert(0, {str(EXAMPLE.parent)!r})\n"
        f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\n"
    )
    settings = _settings(home, tmp_path, (sys.executable, str(wrapper)))
    async with supervised(settings, temporal_address) as (sup, client):
        await wait_until(lambda: bool(_events(settings, "preload")), 60)
        said = _events(settings, "preload")[0].detail
        assert said.startswith("no preloaded spare: thread(s) running after its imports (reaper)"), said
        assert said.endswith("its replacements start cold")
        assert sup.preloads is not None and not sup.preloads.live
        old = sup.primary
        assert old is not None and psutil.Process(old.pid).ppid() == os.getpid()  # started cold, by the supervisor
        await wait_polling(client, settings, old)
        await sup.kill(worker=old)
        await wait_until(lambda: bool(_events(settings, "respawn")), 10, what="a cold respawn")
        assert not _events(settings, "promote")


@pytest.mark.parametrize(
    "told",
    [
        b"not json",
        b'{"modules": "os"}',
        b'{"modules": ["../../etc/passwd", "a b", 5, null, "os", "sys"]}',
        b'{"modules": ["' + b"x" * (2 << 20) + b'"]}',
    ],
    ids=["garbage", "not-a-list", "bad-names-or-known", "oversized"],
)
def test_a_forks_hostile_module_list_imports_nothing(tmp_path: Path, told: bytes):
    from checkpoint_tui.ops import preloader

    ready = str(tmp_path / "p.ready")
    (tmp_path / "p.ready.learned").write_bytes(told)
    said = {"ok": True, "modules": 1}
    before = set(sys.modules)
    preloader.learn(ready, said)  # nothing new to import: no trial fork, nothing said
    assert set(sys.modules) == before and said == {"ok": True, "modules": 1}
    assert not (tmp_path / "p.ready").exists()


def test_a_module_list_planted_as_a_link_is_not_followed(tmp_path: Path):
    from checkpoint_tui.ops import preloader

    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"modules": ["some_module_not_imported_anywhere"]}))
    (tmp_path / "p.ready.learned").symlink_to(target)
    assert preloader.read_bounded(str(tmp_path / "p.ready.learned")) is None


def test_a_forks_exit_is_not_waited_for_once_its_preloader_is_gone(tmp_path: Path):
    """#51 item 11: the exit of an adopted fork whose preloader died is written by nobody; reading it
    held the supervisor's thread for the whole second. With the preloader alive it is waited for."""
    import time

    from checkpoint_tui.ops.procs import ProcIdentity, write_json
    from checkpoint_tui.ops.worker_proc import REAPED_WAIT_S, reaped

    exits = tmp_path / "preloader-0.ready.exits"
    gone = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    ident = ProcIdentity.of(gone.pid)  # taken while it runs (it waits for its stdin to close)
    gone.communicate(timeout=30)
    assert ident is not None
    write_json(tmp_path / "preloader-0.json", {"identity": ident.to_dict()})
    began = time.monotonic()
    assert reaped(exits, 4242) == (None, None)
    assert time.monotonic() - began < 0.2
    me = ProcIdentity.of(os.getpid())
    assert me is not None
    write_json(tmp_path / "preloader-0.json", {"identity": me.to_dict()})  # alive: it may still write
    began = time.monotonic()
    assert reaped(exits, 4242) == (None, None) and time.monotonic() - began >= REAPED_WAIT_S
    exits.write_text('{"pid": 4242, "signal": 9}\n')
    assert reaped(exits, 4242) == ("SIGKILL", None)


@pytest.mark.parametrize("plant", ["fifo", "garbage", "huge", "deep", "not-an-object", "wrong-types", "link"])
def test_the_preloaders_files_when_hostile_are_passed_over_without_a_hang(tmp_path: Path, plant: str):
    """#51 item 11: the preloader's files under run/ (what it said, its fork's pid, how its forks ended,
    what a fork learned) are untrusted. Planted as a FIFO, garbage, 2 MB, nested 100 000 deep, the wrong
    shape or a link: each reader passes over it within a second (a FIFO used to block its open forever)."""
    import time

    from checkpoint_tui.ops.preload import _child
    from checkpoint_tui.ops.preloader import read_bounded
    from checkpoint_tui.ops.procs import ProcIdentity, read_json
    from checkpoint_tui.ops.worker_proc import WorkerProc, reaped

    def planted(name: str) -> Path:
        path = tmp_path / name
        if plant == "fifo":
            os.mkfifo(path)
        elif plant == "link":
            target = tmp_path / f"{name}.real"
            target.write_text('{"ok": true, "pid": 1, "modules": 3}\n{"pid": 4242, "signal": 9}\n')
            path.symlink_to(target)
        else:
            text = {
                "garbage": "\x00\xff not json {",
                "huge": '{"ok": true, "pad": "' + "x" * 2_000_000 + '"}',
                "deep": "[" * 100_000 + "]" * 100_000,
                "not-an-object": '["ok", true]',
                "wrong-types": '{"ok": "yes", "pid": "4242", "signal": 999, "code": -5}',
            }[plant]
            path.write_text(text)
        return path

    me = ProcIdentity.of(os.getpid())
    assert me is not None
    pre = WorkerProc(me, "pre", "preloader", 0)
    began = time.monotonic()
    said = read_json(planted("preloader-0.ready"))
    assert said is None or said.get("ok") is not True  # never read as ready
    assert _child(planted("preloader-0.ready.child"), pre) is None  # no pid taken from it
    exits = planted("preloader-0.ready.exits")
    (tmp_path / "preloader-0.json").write_text("{}")  # its writer unknown: one look, no wait
    assert reaped(exits, 4242) == (None, None) or plant == "wrong-types"
    if plant == "wrong-types":
        assert reaped(exits, 4242) == (None, None)  # a pid that is not a whole number names no fork
    learned = read_bounded(str(planted("preloader-0.ready.learned")))
    assert learned is None or not isinstance(learned, dict) or learned.get("ok") == "yes"
    assert time.monotonic() - began < 1.0


@pytest.mark.parametrize(
    ("flags", "pool"),
    [
        (["--worker-cmd", f"{sys.executable} {EXAMPLE}"], 1),  # preloaded: its spare is a fork
        (["--worker-cmd", "node worker.js"], 2),  # not preloadable: a second worker polls as its spare
        (["--worker-cmd", f"sh -c '{sys.executable} {EXAMPLE}'"], 2),
        (["--worker-cmd", "node worker.js", "--workers", "1"], 1),  # asked for: one, cold replacements
        (["--worker-cmd", "node worker.js", "--workers", "3"], 3),
        (["--worker-cmd", "node worker.js", "--no-spare"], 1),
        (["--worker", "a=node w.js", "--worker", f"b={sys.executable} {EXAMPLE}"], 1),  # one of them preloads
        (["--worker", "a=node w.js", "--worker", "b=node x.js"], 2),
        ([], 1),  # our own worker: its warm spare
    ],
)
def test_a_command_that_cannot_be_preloaded_gets_a_polling_spare_by_default(tmp_path, monkeypatch, flags, pool):
    from checkpoint_tui.cli import workload_flags
    from checkpoint_tui.cli.commands import settings_from
    from checkpoint_tui.cli.parser import build_parser

    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    node = tmp_path / "node"  # resolvable: --worker-cmd's program must exist, and no node need be here
    node.write_text("#!/bin/sh\n")
    node.chmod(0o755)
    args = build_parser().parse_args(["--home", str(tmp_path / "h"), *flags, "status"])
    workload_flags.fold_fleet(args)
    settings = settings_from(args)
    assert settings.pool_size == pool
    assert not (tmp_path / "h" / "run").exists()  # deciding it wrote nothing
