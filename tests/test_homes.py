"""A home that cannot be a lab's (files/home.py) is refused before anything starts: one line, exit 2,
no traceback, nothing written, whatever the command."""

from __future__ import annotations

import os

import pytest

from checkpoint_tui.errors import UsageError
from checkpoint_tui.files.home import MAX_HOME_CHARS, resolve_home
from conftest import run_cli


def bad_homes(root):
    """name -> (the --home, the words its refusal says)."""
    (root / "file").write_text("x")
    (root / "loop-a").symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(root / "loop-a")
    (root / "run-file" / "run").parent.mkdir()
    (root / "run-file" / "run").write_text("x")
    (root / "planted").mkdir()
    (root / "elsewhere").mkdir()
    (root / "planted" / "artifacts").symlink_to(root / "elsewhere")
    (root / "other").mkdir()
    os.chown(root / "other", 4321, 4321) if os.geteuid() == 0 else None
    homes = {
        "a regular file": (root / "file", "is not a folder"),
        "a symlink loop": (root / "loop-a", "a symlink loop"),
        "below a file": (root / "file" / "sub", "Not a directory"),
        "run/ a file": (root / "run-file", "run is not a folder"),
        "a planted artifacts link": (root / "planted", "artifacts is a link"),
        "too long": ("x" * (MAX_HOME_CHARS + 1), f"at most {MAX_HOME_CHARS}"),
        "an unknown user's ~": ("~no-such-user-39/h", "Could not determine home directory"),
    }
    if os.geteuid() == 0:  # only root can give a folder away
        homes["another user's"] = (root / "other", "belongs to uid 4321")
    return homes


def test_resolve_home_refuses_each_bad_home_in_one_line(tmp_path):
    for name, (home, said) in bad_homes(tmp_path).items():
        with pytest.raises(UsageError) as refused:
            resolve_home(home)
        assert said in str(refused.value) and "\n" not in str(refused.value), (name, str(refused.value))
    assert resolve_home(tmp_path / "new" / "home") == tmp_path / "new" / "home"  # creatable: fine, not made
    assert not (tmp_path / "new").exists()


# Every command builds its settings in one place (load_settings), where the home is checked: one that
# only reads and one that starts everything stand for the rest (each invocation is a second of CPU).
@pytest.mark.parametrize("command", [["status"], ["chaos", "--steps", "12", "--kills", "3"]])
def test_every_command_refuses_a_bad_home_before_it_starts(tmp_path, command):
    homes = bad_homes(tmp_path)
    for name in ("a regular file", "a symlink loop", "a planted artifacts link"):
        home, said = homes[name]
        out = run_cli("--home", str(home), *command, timeout=60)
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1 and said in lines[0], (name, out.stdout, out.stderr)
        assert "Traceback" not in out.stdout + out.stderr
    assert list((tmp_path / "elsewhere").iterdir()) == []  # nothing written through the planted link
    assert not (tmp_path / "planted" / "run").exists()
