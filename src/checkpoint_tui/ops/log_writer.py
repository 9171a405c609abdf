"""The writer of a capped log (see logcap.py), run as a script with `python -I -S`: it imports os and
sys only, so it starts in milliseconds and stays small. argv: RUN_DIR_FD NAME CAP; stdin: the pipe."""

import os
import sys

CHUNK = 64 * 1024
_APPEND = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC


def _open(dir_fd, name):
    fd = os.open(name, _APPEND, 0o600, dir_fd=dir_fd)
    return fd, os.fstat(fd)


def _rotate(dir_fd, name, fd, st):
    """NAME -> NAME.1, unless another writer of the same log rotated it already (the name is then
    another file): either way, append to whatever NAME is now."""
    try:
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            os.rename(name, f"{name}.1", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    os.close(fd)
    return _open(dir_fd, name)


def serve(dir_fd: int, name: str, cap: int, source: int = 0) -> None:
    """Copy `source` to run/NAME until EOF, rotating at `cap`."""
    fd, st = _open(dir_fd, name)
    size = st.st_size
    while chunk := os.read(source, CHUNK):
        if size and size + len(chunk) > cap:
            fd, st = _rotate(dir_fd, name, fd, st)
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view) :]
        size = os.fstat(fd).st_size  # other writers' appends count too
    os.close(fd)


if __name__ == "__main__":
    try:
        serve(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
    except OSError:  # run/ gone or the log refused: the child's output is dropped, the child runs on
        while os.read(0, CHUNK):
            pass
