"""Where a user's effects land, read as the seed reads its outbox: one id per effect, so an effect
done twice is an id seen twice (`COUNT(*) - COUNT(DISTINCT id)`).

`--effects SPEC` names one destination:
- `sql:URL:QUERY`: a SELECT (or WITH) over a SQLite file (`sqlite:PATH`) or a PostgreSQL database
  (`postgresql://...`, its password from PGPASSWORD or ~/.pgpass, never the URL); one row per effect,
  its first column the effect's id;
- `file:PATH[:REGEX]`: one effect per line of a file, or of each regular file directly in a folder;
  the whole line is the id, unless REGEX matches it and names it with its first group (a line it does
  not match is no effect);
- `http:NAME:FIELD`: each request chaos's proxy of `--dependency NAME` forwarded and saw answered 2xx,
  identified by its header or JSON body field FIELD (run/dependency-NAME.log, written by the proxy).

Reading never writes: SQLite opens read-only (`mode=ro`, `query_only`), PostgreSQL in a read-only
transaction. Every read is bounded (bytes, files, rows, id length, seconds), refuses links and
anything but regular files, and fails with one line (`DestinationError`)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from checkpoint_tui.errors import UsageError
from checkpoint_tui.files import read_input
from checkpoint_tui.settings import is_postgres_url, postgres_label, postgres_parts

MAX_SPEC = 4096
MAX_DESTINATIONS = 8
MAX_FILE_BYTES = 64 * 1024 * 1024  # one file, or a folder's files together
MAX_FILES = 10_000  # files read in a folder
MAX_IDS = 1_000_000  # effects (lines, rows) in one destination
MAX_ID_CHARS = 1000  # a longer id is cut here: two effects equal that far are the same effect
MAX_LINE_CHARS = 16_384  # a longer line is matched only this far (a regex cannot run away on a huge line)
QUERY_TIMEOUT_S = 10.0
MAX_SQLITE_COPY = 512 * 1024 * 1024  # a WAL database is read from a copy of it and its log
_QUERY_START = re.compile(r":(?=\s*(?:select|with)\b)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DEPENDENCY = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")  # as --dependency NAME= takes it
_FIELD = re.compile(r"[A-Za-z0-9_.-]{1,128}")


class DestinationError(UsageError):
    """A destination that cannot be read: one line, exit 2 (before anything starts)."""


@dataclass(frozen=True)
class Destination:
    kind: str  # "sql" or "file"
    spec: str  # as given (it holds no password: one is refused), for a report's reproducing command
    target: str  # the database URL, or the file's or folder's absolute path
    query: str | None = None
    pattern: str | None = None  # file: the regex whose first group names the id

    @property
    def label(self) -> str:
        """The destination as reports name it: never a user name or password."""
        if self.kind == "file":
            return f"file:{self.target}" + (f":{self.pattern}" if self.pattern else "")
        if self.kind == "http":
            return f"http:{self.target}:{self.pattern}"
        where = postgres_label(self.target) if is_postgres_url(self.target) else self.target
        return f"sql:{where}"

    def to_json(self) -> dict:
        return {"kind": self.kind, "label": self.label}


def parse_destination(text: str, cwd: Path | None = None) -> Destination:
    """`--effects SPEC` checked (a DestinationError says what is wrong); nothing is read yet."""
    if not text or len(text) > MAX_SPEC or _CONTROL.search(text):
        raise DestinationError(f"--effects takes sql:URL:QUERY or file:PATH[:REGEX], one line of at most {MAX_SPEC}")
    kind, _, rest = text.partition(":")
    if kind == "file":
        return _file_spec(rest, cwd or Path.cwd())
    if kind == "sql":
        return _sql_spec(rest, cwd or Path.cwd())
    if kind == "http":
        name, sep, field_name = rest.partition(":")
        if not sep or not _DEPENDENCY.fullmatch(name) or not _FIELD.fullmatch(field_name):
            raise DestinationError(
                "--effects http:NAME:FIELD: NAME a --dependency's name, FIELD a request header "
                "or a JSON body field (letters, digits, _ . -; at most 128)"
            )
        return Destination("http", f"http:{rest}", name, pattern=field_name)
    raise DestinationError("--effects takes sql:URL:QUERY or file:PATH[:REGEX]")


def _file_spec(rest: str, cwd: Path) -> Destination:
    path, pattern = _split_path(rest, cwd)
    if not path:
        raise DestinationError("--effects file:PATH: the path is empty")
    if pattern is not None:
        try:
            compiled = re.compile(pattern)
        except re.error as err:
            raise DestinationError(f"--effects file:{path}:REGEX: not a regular expression ({err})") from None
        if len(pattern) > 512:
            raise DestinationError("--effects file:PATH:REGEX: the regular expression is over 512 characters")
        if compiled.groups < 1:
            raise DestinationError(
                "--effects file:PATH:REGEX: the regular expression needs a group: its first group is the effect's id"
            )
    target = Path(os.path.abspath(cwd / Path(path).expanduser()))
    return Destination("file", f"file:{rest}", str(target), pattern=pattern)


def _split_path(rest: str, cwd: Path) -> tuple[str, str | None]:
    """PATH[:REGEX]: the path is the whole text if it exists, else the shortest text before a ':' that exists
    (a regex may hold ':' too), else the shortest one whose folder exists (an outbox not made yet)."""
    if (cwd / rest).exists() or ":" not in rest:
        return rest, None
    cuts = [i for i, ch in enumerate(rest) if ch == ":" and i > 0]
    for test in (lambda p: p.exists(), lambda p: p.parent.is_dir()):
        for i in cuts:
            if test(cwd / Path(rest[:i]).expanduser()):
                return rest[:i], rest[i + 1 :]
    return rest, None


def _sql_spec(rest: str, cwd: Path) -> Destination:
    match = _QUERY_START.search(rest)
    if match is None:
        raise DestinationError(
            "--effects sql:URL:QUERY: no query after the URL (a SELECT or WITH, whose first column is the effect's id)"
        )
    url, query = rest[: match.start()], rest[match.end() :].strip()
    if ";" in query.rstrip(";"):
        raise DestinationError("--effects sql:URL:QUERY: one statement, no ';' inside it")
    query = query.rstrip(";").strip()
    if is_postgres_url(url):
        parts = postgres_parts(url)
        if parts.get("password") or parts.get("sslpassword") or "password" in url.lower():
            raise DestinationError(
                "--effects: a password in the URL would sit on a command line and in reports; "
                "give it in PGPASSWORD or ~/.pgpass"
            )
        return Destination("sql", f"sql:{rest}", url, query=query)
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:")
        path = path[3:] if path.startswith("///") else path[2:] if path.startswith("//") else path  # SQLAlchemy's
        if not path:
            raise DestinationError("--effects sql:sqlite:PATH:QUERY: the path is empty")
        return Destination("sql", f"sql:{rest}", os.path.abspath(cwd / Path(path).expanduser()), query=query)
    raise DestinationError("--effects sql:URL:QUERY: the URL is neither sqlite:PATH nor postgresql://...")


def read_ids(dest: Destination, run_dir: Path | None = None) -> Counter[str]:
    """Every effect the destination holds now, as id -> how many times it is there. `run_dir`: the home's
    run/, where a dependency's proxy logs what it forwarded (http:)."""
    if dest.kind == "file":
        return _file_ids(dest)
    if dest.kind == "http":
        return _http_ids(dest, run_dir)
    if is_postgres_url(dest.target):
        return _postgres_ids(dest)
    return _sqlite_ids(dest)


def _file_ids(dest: Destination) -> Counter[str]:
    path = Path(dest.target)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if path.parent.is_dir():
            return Counter()  # nothing landed there yet: an outbox the first effect creates
        raise DestinationError(f"--effects {dest.label}: no folder {path.parent}") from None
    except OSError as err:
        raise DestinationError(f"--effects {dest.label}: {err.strerror or err}") from None
    if stat.S_ISLNK(st.st_mode):
        raise DestinationError(f"--effects {dest.label}: a symbolic link; name the file or folder itself")
    if stat.S_ISDIR(st.st_mode):
        files = _folder_files(path, dest)
    elif stat.S_ISREG(st.st_mode):
        files = [path]
    else:
        raise DestinationError(f"--effects {dest.label}: neither a regular file nor a folder")
    pattern = re.compile(dest.pattern) if dest.pattern else None
    ids: Counter[str] = Counter()
    n, left = 0, MAX_FILE_BYTES
    for f in files:
        data = read_input(f, f"--effects {dest.kind}", left, follow=False)
        left -= len(data)
        for line in data.decode("utf-8", "replace").split("\n"):  # lines as the file has them, nothing else
            found = _line_id(line.removesuffix("\r"), pattern)
            if found is not None:
                ids[found] += 1
                n += 1
                if n > MAX_IDS:
                    raise DestinationError(f"--effects {dest.label}: over {MAX_IDS} effects")
    return ids


def _http_ids(dest: Destination, run_dir: Path | None) -> Counter[str]:
    """The ids of the requests the dependency's proxy logged as answered 2xx (proof/nemeses/http_log.py)."""
    if run_dir is None:
        raise DestinationError(f"--effects {dest.label}: only chaos routes a --dependency through its proxy")
    path = run_dir / f"dependency-{dest.target}.log"
    if not os.path.lexists(path):
        return Counter()  # nothing forwarded yet
    ids: Counter[str] = Counter()
    for line in read_input(path, "--effects http", MAX_FILE_BYTES, follow=False).decode("utf-8", "replace").split("\n"):
        try:
            doc = json.loads(line) if line.strip() else None
        except (ValueError, RecursionError):
            continue  # a torn last line (the proxy killed mid-write)
        if isinstance(doc, dict) and isinstance(doc.get("id"), str):
            ids[doc["id"][:MAX_ID_CHARS]] += 1
    return ids


def _folder_files(path: Path, dest: Destination) -> list[Path]:
    """The folder's regular files (not links, not sub-folders), by name; a link inside is refused."""
    found: list[Path] = []
    try:
        entries = _scan(path, MAX_FILES + 1)
    except OSError as err:
        raise DestinationError(f"--effects {dest.label}: {err.strerror or err}") from None
    if len(entries) > MAX_FILES:
        raise DestinationError(f"--effects {dest.label}: over {MAX_FILES} entries in the folder")
    for entry in entries:
        if entry.is_symlink():
            raise DestinationError(f"--effects {dest.label}: {entry.name} is a symbolic link; refusing it")
        if entry.is_file(follow_symlinks=False):
            found.append(Path(entry.path))
    return sorted(found)


def _scan(path: Path, limit: int) -> list[os.DirEntry]:
    with os.scandir(path) as it:
        return [e for _, e in zip(range(limit), it, strict=False)]


def _line_id(line: str, pattern: re.Pattern[str] | None) -> str | None:
    line = line[:MAX_LINE_CHARS]
    if pattern is None:
        return line[:MAX_ID_CHARS] if line.strip() else None
    m = pattern.search(line)
    if m is None or m.group(1) is None:
        return None
    return m.group(1)[:MAX_ID_CHARS]


def _sqlite_ids(dest: Destination) -> Counter[str]:
    path = Path(dest.target)
    try:
        st = os.lstat(path)
    except OSError as err:
        raise DestinationError(f"--effects {dest.label}: {err.strerror or err}") from None
    if not stat.S_ISREG(st.st_mode):
        raise DestinationError(f"--effects {dest.label}: not a regular file (a link, a folder or a device)")
    if _wal_mode(path):  # read-only or not, SQLite leaves -wal and -shm beside a WAL database: read a copy
        with tempfile.TemporaryDirectory(prefix="checkpoint-destination-") as tmp:
            return _sqlite_query(_copy_wal_db(path, Path(tmp), dest), dest, "")
    return _sqlite_query(path, dest, "?mode=ro")


def _wal_mode(path: Path) -> bool:
    """The database's header says WAL (file format versions 2 at offsets 18 and 19)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise DestinationError(f"--effects sql: cannot read {path}: {err.strerror or err}") from None
    try:
        head = os.read(fd, 100)
    finally:
        os.close(fd)
    return len(head) >= 20 and head[18] == 2


def _copy_wal_db(path: Path, tmp: Path, dest: Destination) -> Path:
    """The database and its write-ahead log copied into `tmp` (bounded), where reading it writes nothing of
    the user's."""
    left = MAX_SQLITE_COPY
    for src, name in ((path, "db"), (path.with_name(path.name + "-wal"), "db-wal")):
        if name == "db-wal" and not os.path.lexists(src):
            continue
        data = read_input(src, f"--effects {dest.kind}", left, follow=False)
        left -= len(data)
        (tmp / name).write_bytes(data)
    return tmp / "db"


def _sqlite_query(path: Path, dest: Destination, mode: str) -> Counter[str]:
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    try:
        conn = sqlite3.connect(f"{path.as_uri()}{mode}", uri=True, timeout=QUERY_TIMEOUT_S)
    except sqlite3.Error as err:
        raise DestinationError(f"--effects {dest.label}: cannot open it read-only ({err})") from None
    try:
        conn.execute("PRAGMA query_only = ON")
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        return _rows(conn.execute(_bounded(dest.query)), dest)
    except sqlite3.Error as err:
        why = f"took over {QUERY_TIMEOUT_S:g} s" if time.monotonic() > deadline else str(err)
        raise DestinationError(f"--effects {dest.label}: the query failed: {why[:200]}") from None
    finally:
        conn.close()


def _postgres_ids(dest: Destination) -> Counter[str]:
    import psycopg

    options = f"-c default_transaction_read_only=on -c statement_timeout={int(QUERY_TIMEOUT_S * 1000)}"
    try:
        with psycopg.connect(dest.target, connect_timeout=5, options=options) as conn:
            conn.read_only = True
            with conn.cursor(name="checkpoint_destination") as cur:  # server-side: rows come in batches
                cur.execute(_bounded(dest.query))  # the user's own query, read-only
                return _rows(cur, dest)
    except psycopg.OperationalError as err:
        first = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise DestinationError(f"--effects {dest.label}: {first}") from None
    except psycopg.Error as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise DestinationError(f"--effects {dest.label}: the query failed: {first[:200]}") from None


def _bounded(query: str | None) -> str:
    """The user's query with at most one row past the bound (the count is checked as rows come)."""
    return f"SELECT * FROM ({query}) AS effects_read LIMIT {MAX_IDS + 1}"


def _rows(cur: object, dest: Destination) -> Counter[str]:
    ids: Counter[str] = Counter()
    n = 0
    while batch := cur.fetchmany(1000):  # type: ignore[attr-defined]
        for row in batch:
            if not row:
                raise DestinationError(f"--effects {dest.label}: the query returns no column (the first is the id)")
            value = row[0][:MAX_ID_CHARS] if isinstance(row[0], str | bytes | memoryview) else row[0]  # cut first
            ids[str(value)[:MAX_ID_CHARS]] += 1
        n += len(batch)
        if n > MAX_IDS:
            raise DestinationError(f"--effects {dest.label}: over {MAX_IDS} effects")
    return ids
