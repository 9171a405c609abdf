"""The effects library checks where it writes before it claims anything (issue 25, findings 6 and 7):
the home's run/ as the CLI checks it (ours, not writable by others), the SQLite ledger a regular
file of ours, the probe log a regular file it can append to and fsync. Each refusal is one
EffectsConfigError, nothing is claimed, and once the cause is gone the next call is `applied` (not
`recovered`: no claim was left behind)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from checkpoint_tui.effects import EffectsConfigError
from test_effects_library import Lab, call, lab  # noqa: F401 - `lab` is the two-backend fixture

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another uid needs root")


def claims(lab: Lab, key: str) -> int:  # noqa: F811 - the fixture's name
    return lab.conn.execute("SELECT COUNT(*) FROM effects WHERE id = ?", (f"key:{key}",)).fetchone()[0]


async def refused_then_applied(lab: Lab, api: str, key: str, match: str, undo) -> None:  # noqa: F811
    """The call is refused with `match`, claims and writes nothing; after `undo()` it is applied."""
    writes: list[str] = []
    with pytest.raises(EffectsConfigError, match=match):
        await call(api, kind="email", payload="p", key=key, write=writes.append)
    undo()
    assert writes == [] and claims(lab, key) == 0
    assert await call(api, kind="email", payload="p", key=key, write=writes.append) == "applied"
    assert writes == ["p"]


@pytest.mark.parametrize("api", ["async", "sync"])
async def test_a_world_writable_run_folder_is_refused(lab: Lab, api: str, tmp_path: Path) -> None:  # noqa: F811
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    run.chmod(0o777)
    await refused_then_applied(lab, api, "k-0777", "writable by group or others", lambda: run.chmod(0o700))


@root_only
async def test_a_run_folder_of_another_user_is_refused(lab: Lab, tmp_path: Path) -> None:  # noqa: F811
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    os.chown(run, NOBODY, NOBODY)
    await refused_then_applied(lab, "async", "k-uid", "not to this user; refusing", lambda: os.chown(run, 0, 0))


@root_only
async def test_a_ledger_of_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ledger planted in run/ with a stamped claim for the key: the real call must not be `skipped`."""
    from checkpoint_tui import effects
    from checkpoint_tui.ledger.store import close_all

    monkeypatch.setenv("CHECKPOINT_HOME", str(tmp_path))
    monkeypatch.delenv("CHECKPOINT_LEDGER_URL", raising=False)
    monkeypatch.delenv("CHECKPOINT_PROBE_LOG", raising=False)
    planted = Lab(str(tmp_path / "run" / "checkpoint.db"), tmp_path / "run" / "effects-probe.jsonl")
    assert await call("async", kind="email", payload="p", key="k-planted", write=lambda p: None) == "applied"
    effects.close()
    close_all()
    os.chown(planted.target, NOBODY, NOBODY)  # now someone else's file, with a stamped claim for the key
    writes: list[str] = []
    try:
        with pytest.raises(EffectsConfigError, match="owned by another user"):
            await call("async", kind="email", payload="p", key="k-planted", write=writes.append)
    finally:
        os.chown(planted.target, 0, 0)
        effects.close()
    assert writes == [] and claims(planted, "k-planted") == 1
    close_all()


@pytest.mark.parametrize("api", ["async", "sync"])
@pytest.mark.parametrize("where", ["/dev/null", "a folder"])
async def test_a_probe_log_that_cannot_be_fsynced_is_refused_before_the_claim(
    lab: Lab,  # noqa: F811 - the fixture's name
    api: str,
    where: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    probe = Path(where) if where.startswith("/") else tmp_path / "probe-folder"
    probe.mkdir(exist_ok=True) if not where.startswith("/") else None
    monkeypatch.setenv("CHECKPOINT_PROBE_LOG", str(probe))
    good = tmp_path / "probe.jsonl"
    await refused_then_applied(
        lab, api, f"k-probe-{api}", "probe log", lambda: monkeypatch.setenv("CHECKPOINT_PROBE_LOG", str(good))
    )
    assert good.stat().st_size > 0


def _home_loop(tmp_path: Path) -> str:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    return str(tmp_path / "loop")


def _home_deep(tmp_path: Path) -> str:
    return str(tmp_path) + ("/" + "d" * 200) * 40  # over PATH_MAX: errno 36 on mkdir


def _home_file(tmp_path: Path) -> str:
    (tmp_path / "a-file").write_text("")
    return str(tmp_path / "a-file")


def _home_lines(tmp_path: Path) -> str:
    (tmp_path / "a\nb").write_text("")  # a file, so it fails, with a newline in its name
    return str(tmp_path / "a\nb")


HOMES = {
    "a symlink loop": (_home_loop, "cannot be resolved: Symlink loop"),
    "a path too long": (_home_deep, "File name too long"),
    "a regular file": (_home_file, "Not a directory"),
    "a name with a newline": (_home_lines, "Not a directory"),
    "~ of no user": (lambda tmp_path: "~no-such-user-39/home", "cannot be resolved"),
}


@pytest.mark.parametrize("api", ["async", "sync"])
@pytest.mark.parametrize("case", list(HOMES))
async def test_a_home_that_cannot_be_resolved_or_made_is_one_config_error_line(
    lab: Lab,  # noqa: F811 - the fixture's name
    api: str,
    case: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    """Issue 39, finding 4: not a RuntimeError from pathlib, nor a line of thousands of characters or
    several lines: one EffectsConfigError line naming what is wrong; nothing claimed."""
    make, match = HOMES[case]
    monkeypatch.setenv("CHECKPOINT_HOME", make(tmp_path))  # its run/ holds the probe log on both backends
    writes: list[str] = []
    with pytest.raises(EffectsConfigError, match=match) as err:
        await call(api, kind="email", payload="p", key="k-home", write=writes.append)
    message = str(err.value)
    assert "\n" not in message and len(message) < 500, message
    assert writes == [] and claims(lab, "k-home") == 0


def test_a_relative_home_without_a_current_folder_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from checkpoint_tui import effects

    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    monkeypatch.setenv("CHECKPOINT_HOME", "relative/home")
    monkeypatch.delenv("CHECKPOINT_LEDGER_URL", raising=False)
    with pytest.raises(EffectsConfigError, match="cannot be resolved: No such file or directory"):
        effects.ledger_target()
