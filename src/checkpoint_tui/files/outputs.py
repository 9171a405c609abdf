"""Writing a file for a user, one way: into a directory opened once (its descriptor, so a directory
swapped for a link afterwards is not followed), as a temp file created O_EXCL|O_NOFOLLOW and renamed
over the name (a link planted at the name is replaced, never written through). An output path a user
names that is itself a symbolic link is refused, as is one that is a directory where a file is wanted,
or a FIFO or device (renaming over /dev/null would replace the device node). Clean-up removes only
regular files the lab wrote before (a manifest in the directory), never through a link."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from checkpoint_tui.errors import UsageError

MANIFEST = ".checkpoint-tui-files.json"  # what the lab wrote into an output directory, for clean-up
MANIFEST_LIMIT = 4 * 1024 * 1024
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise UsageError(f"cannot use {path}: {err.strerror or err}") from None


def _creatable_under(path: Path, what: str) -> None:
    """The nearest existing ancestor is a directory we may write in (the rest is made when writing)."""
    parent = path.parent
    while _lstat(parent) is None and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {path}: cannot create it under {parent}")


def check_output_path(path: str | os.PathLike[str], what: str) -> Path:
    """A file the lab will write at `path`: refused (UsageError naming `what`) if it is a symbolic link,
    a directory, a FIFO or device, not writable, or cannot be created. Returns it as a Path."""
    out = Path(path)
    st = _lstat(out)
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UsageError(f"{what} {out} is a symbolic link; refusing to write through it (name the real file)")
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(f"{what} {out} is a directory; give a file path")
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"{what} {out} exists and is not a regular file; refusing to replace it")
        if not os.access(out.parent, os.W_OK | os.X_OK):
            raise UsageError(f"{what} {out}: its directory is not writable")
    _creatable_under(out, what)
    return out


def check_output_dir(path: str | os.PathLike[str], what: str, subdirs: tuple[str, ...] = ()) -> Path:
    """A directory the lab will write into: refused if it is a symbolic link, exists and is not a
    directory, is not writable, or cannot be created; so is any of `subdirs` it will write into that
    exists as a link or a file."""
    out = Path(path)
    st = _lstat(out)
    if st is None:
        _creatable_under(out, what)
    elif stat.S_ISLNK(st.st_mode):
        raise UsageError(f"{what} {out} is a symbolic link; refusing to write through it (name the real directory)")
    elif not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {out} exists and is not a directory")
    elif not os.access(out, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {out}: not writable")
    for name in subdirs:  # what the writer will make inside: a link or a file planted there is refused now,
        sub = _lstat(out / name)  # not after the whole run
        if sub is not None and (stat.S_ISLNK(sub.st_mode) or not stat.S_ISDIR(sub.st_mode)):
            kind = "a symbolic link" if stat.S_ISLNK(sub.st_mode) else "not a directory"
            raise UsageError(f"{what} {out / name} is {kind}; refusing to write there (remove it or name another)")
    return out


def write_output(path: str | os.PathLike[str], data: bytes | str, what: str = "output") -> Path:
    """Write `data` to the file `path` (checked as check_output_path does, now), atomically."""
    out = check_output_path(path, what)
    with OutputDir(out.parent, what, make_parents=True, follow=True) as directory:
        directory.write(out.name, data)
    return out


def _name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"not a plain file name: {name!r}")
    return name


class OutputDir:
    """A directory opened once; files are written into it by name through its descriptor. `follow`
    allows the directory's own path to end in a link (a parent a user named for a file); a directory a
    user named as the output itself does not."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        what: str,
        *,
        make_parents: bool = True,
        follow: bool = False,
        _fd: int | None = None,
    ) -> None:
        self.path, self.what = Path(path), what
        self.written: list[str] = []  # names relative to this directory, subdirectories included
        self._children: list[OutputDir] = []
        if _fd is not None:
            self.fd = _fd
            return
        if not follow:
            check_output_dir(self.path, what)
        try:
            self.path.mkdir(parents=make_parents, exist_ok=True)
            self.fd = os.open(self.path, _DIR & ~os.O_NOFOLLOW if follow else _DIR)
        except OSError as err:
            raise UsageError(f"cannot write {what} {self.path}: {_reason(err)}") from None

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for child in self._children:
            child.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def write(self, name: str, data: bytes | str) -> Path:
        """`name` in this directory holds `data`: a fresh temp file renamed over it."""
        _name(name)
        raw = data.encode() if isinstance(data, str) else data
        tmp = f".{name[:80]}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, _CREATE, 0o666, dir_fd=self.fd)
        except OSError as err:
            raise UsageError(f"cannot write {self.what} {self.path / name}: {_reason(err)}") from None
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
            os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as err:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=self.fd)
            raise UsageError(f"cannot write {self.what} {self.path / name}: {_reason(err)}") from None
        self.written.append(name)
        return self.path / name

    def subdir(self, name: str) -> OutputDir:
        """A directory in this one (made if missing); a link or a file planted at its name is refused."""
        _name(name)
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=self.fd)
        try:
            fd = os.open(name, _DIR, dir_fd=self.fd)
        except OSError as err:
            raise UsageError(f"cannot write {self.what} {self.path / name}: {_reason(err)}") from None
        child = OutputDir(self.path / name, self.what, _fd=fd)
        self._children.append(child)
        return child

    def names(self) -> list[str]:
        """Everything written through this directory and its subdirectories, as relative paths."""
        found = list(self.written)
        for child in self._children:
            found += [f"{child.path.name}/{n}" for n in child.names()]
        return found

    def replace_manifest(self) -> list[str]:
        """Record what was written now; remove the regular files the previous manifest named that were
        not written again (a bundle written into the same directory before). Returns those removed."""
        now = set(self.names())
        removed = [name for name in self._manifest() if name not in now and self._remove(name)]
        self.write(MANIFEST, json.dumps(sorted(now), indent=0))
        return removed

    def _manifest(self) -> list[str]:
        try:
            fd = os.open(MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.fd)
        except OSError:
            return []  # none yet (or a link: not ours)
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return []
            raw = fh.read(MANIFEST_LIMIT + 1)
        try:
            names = json.loads(raw) if len(raw) <= MANIFEST_LIMIT else []
        except (ValueError, RecursionError):
            return []
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    def _remove(self, relative: str) -> bool:
        """Unlink a regular file at `relative` (one subdirectory level at most), never through a link."""
        parts = relative.split("/")
        if len(parts) > 2 or any(p in ("", ".", "..") for p in parts):
            return False
        fd = self.fd
        try:
            if len(parts) == 2:
                fd = os.open(parts[0], _DIR, dir_fd=self.fd)
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                return False
            os.unlink(parts[-1], dir_fd=fd)
            return True
        except OSError:
            return False
        finally:
            if fd != self.fd:
                os.close(fd)

    @contextlib.contextmanager
    def scratch(self) -> Iterator[Path]:
        """A fresh private folder in this directory for a writer that opens paths itself; removed
        afterwards with whatever is left in it (move what is wanted out with `adopt`)."""
        name = f".scratch-{os.getpid()}-{secrets.token_hex(4)}"
        os.mkdir(name, 0o700, dir_fd=self.fd)
        try:
            yield self.path / name
        finally:
            shutil.rmtree(name, dir_fd=self.fd, ignore_errors=True)

    def adopt(self, source: Path, names: Iterable[str]) -> list[Path]:
        """Move files another writer made in the private directory `source` (our own, fresh) into this
        one by rename; returns their new paths."""
        moved = []
        src = os.open(source, _DIR)
        try:
            for name in names:
                _name(name)
                os.rename(name, name, src_dir_fd=src, dst_dir_fd=self.fd)
                self.written.append(name)
                moved.append(self.path / name)
        finally:
            os.close(src)
        return moved


def _reason(err: OSError) -> str:
    if err.errno in (errno.ELOOP, errno.ENOTDIR):
        return "a symbolic link or a file is in the way; refusing to follow it"
    return err.strerror or str(err)
