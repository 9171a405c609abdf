"""The home folder named by --home / CHECKPOINT_HOME (or the current directory), checked before any
command starts anything: a folder of this user's that this user can write, whose run/ and artifacts/
(when they exist) are real folders, not files or links. Each refusal is one line and exit 2.

Why the owner matters: whoever owns a folder can rename what is in it, so in a home of another user
(say, as root in a user's folder) they could plant `artifacts -> /elsewhere` and have our writes land
outside the home."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from checkpoint_tui.errors import UsageError

MAX_HOME_CHARS = 1024  # run/ paths nest a few levels below it; PATH_MAX is 4096
SHOWN_CHARS = 80  # how much of a hostile path a one-line error repeats


def shown(raw: object) -> str:
    """A path for a one-line error: its start and its end (the name that is wrong is at the end)."""
    text = str(raw)
    if len(text) <= SHOWN_CHARS:
        return text
    head = SHOWN_CHARS // 3
    return f"{text[:head]}…{text[-(SHOWN_CHARS - head) :]}"


def resolve_home(raw: str | Path, source: str = "--home") -> Path:
    """The absolute home, every check passed; UsageError naming `source` otherwise."""
    if len(str(raw)) > MAX_HOME_CHARS:
        raise UsageError(f"{source} is {len(str(raw))} characters long; at most {MAX_HOME_CHARS}")
    try:
        path = Path(raw).expanduser().resolve()
    except RuntimeError as err:  # pathlib's "Symlink loop from ...", or "Could not determine home directory"
        why = "a symlink loop" if "loop" in str(err).lower() else str(err)[:SHOWN_CHARS]
        raise UsageError(f"{source} {shown(raw)}: {why}") from None
    except OSError as err:
        raise UsageError(f"{source} {shown(raw)}: {err.strerror or err}") from None
    if len(str(path)) > MAX_HOME_CHARS:
        raise UsageError(f"{source} resolves to a path of {len(str(path))} characters; at most {MAX_HOME_CHARS}")
    check_home(path, source)
    return path


def check_home(path: Path, source: str = "--home") -> None:
    try:
        st = path.stat()
    except FileNotFoundError:
        _check_creatable(path, source)
        return
    except OSError as err:
        raise UsageError(f"{source} {shown(path)}: {_reason(err)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{source} {shown(path)} is not a folder (a file or a device); name a folder")
    if st.st_uid != os.geteuid():
        raise UsageError(
            f"{source} {shown(path)} belongs to uid {st.st_uid}, not to this user: its owner could plant "
            "links where the lab writes; use a folder of your own"
        )
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{source} {shown(path)} is not writable by this user; chmod u+rwx it or name another")
    for name in ("run", "artifacts"):
        _check_subfolder(path / name, source)


def _check_subfolder(path: Path, source: str) -> None:
    """run/ and the default artifacts/: absent, or a real folder of ours (never a link: we write there)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    except OSError as err:
        raise UsageError(f"{source}: {shown(path)}: {_reason(err)}") from None
    if (why := _not_our_folder(st)) is not None:
        raise UsageError(f"{shown(path)} {why}; the lab writes there: move it away or name another {source}")


def _check_creatable(path: Path, source: str) -> None:
    """A home that does not exist yet: its nearest existing ancestor must be a folder we can write."""
    parent = path.parent
    while True:
        try:
            st = parent.stat()
            break
        except FileNotFoundError:
            if parent == parent.parent:
                return
            parent = parent.parent
        except OSError as err:
            raise UsageError(f"{source} {shown(path)}: {_reason(err)}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{source} {shown(path)}: {shown(parent)} is a file, not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{source} {shown(path)} cannot be created: {shown(parent)} is not writable by this user")


def check_private_dir(path: Path, private: bool = True) -> None:
    """Refuse a folder owned by someone else, or one others could write to (they could plant records
    that name their processes, or links where we write). Not `private` (artifacts/, for the user to
    read and share): only a real folder of ours is asked for."""
    st = path.lstat()
    if (why := _not_our_folder(st)) is not None:
        raise UsageError(f"{path} {why}; refusing to use it")
    if not private:
        return
    if st.st_mode & 0o022:
        raise UsageError(f"{path} is writable by group or others (mode {st.st_mode & 0o777:o}); chmod 700 it")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)  # ours, only readable by others: tighten it


def _not_our_folder(st: os.stat_result) -> str | None:
    """Why an lstat is not a real folder of this user's (a link, a file, another user's), or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a link"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder (a file?)"
    if st.st_uid != os.geteuid():
        return f"belongs to uid {st.st_uid}, not to this user"
    return None


def _reason(err: OSError) -> str:
    if err.errno == errno.ENAMETOOLONG:
        return "a name in the path is too long"
    if err.errno == errno.ELOOP:
        return "a symlink loop"
    return err.strerror or type(err).__name__


def check_private_file(path: Path) -> None:
    """Refuse a file of ours (the ledger) that is a link, not a regular file, or owned by someone else
    (a planted ledger could hold stamped claims for keys whose writes then never run). A missing one
    is fine: it is created 0600."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{path} is not a regular file (a link, a folder or a device); refusing to use it")
    if st.st_uid != os.geteuid():
        raise UsageError(f"{path} is owned by another user (uid {st.st_uid}); refusing to use it")
