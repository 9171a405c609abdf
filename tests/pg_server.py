"""A real PostgreSQL server for the tests: Debian's binaries, `initdb` into a temp dir, `pg_ctl` on a
free loopback port, stopped by the fixture's finalizer. PostgreSQL refuses to run as root, so as root
(CI) the server runs as the `postgres` user the Debian package creates."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.ops.procs import free_port

SKIP_ENV = "CHECKPOINT_SKIP_POSTGRES"


def pg_bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


@dataclass
class PgServer:
    bindir: Path
    root: Path
    port: int = 0
    user: str | None = None  # the OS user the server runs as (None: us)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def _run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = list(argv)
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            self.user = "postgres"
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "checkpoint",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self.port = free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200"
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def crash_restart(self) -> None:
        """The server dies the hard way (`-m immediate`: no shutdown checkpoint, crash recovery at the
        next start) and comes back on the same port."""
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-m",
            "immediate",
            "-w",
            "-t",
            "60",
            "restart",
            "-l",
            str(self.root / "server.log"),
        )

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if self.data.exists():
            subprocess.run(
                (["runuser", "-u", self.user, "--"] if self.user else [])
                + [str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://checkpoint@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        import psycopg

        name = f"t_{secrets.token_hex(4)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


@contextlib.contextmanager
def running_server(bindir: Path, prefix: str = "ckpt-pg-") -> Iterator[PgServer]:
    """A started server in a new temp dir; stopped and deleted on the way out, even on failure."""
    server = PgServer(bindir, Path(tempfile.mkdtemp(prefix=prefix)))
    try:
        server.start()
        yield server
    finally:
        server.stop()


def main() -> None:
    """`.venv/bin/python tests/pg_server.py`: a throwaway server for trying the shared ledger or running
    the benchmarks with --ledger; prints a database URL, stops and deletes everything on Ctrl-C/SIGTERM."""
    import signal

    bindir = pg_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL server binaries not found: install Debian's postgresql package")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        with running_server(bindir) as server:
            print(server.new_database(), flush=True)
            signal.pause()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
