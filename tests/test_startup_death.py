"""A child that dies during start-up is reported with how it died (signal name or exit code) and the
last meaningful line of its log, not only "see the log". No llama.cpp build needed: stand-in
processes (this Python running small scripts) die the ways a wrong-CPU build does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from checkpoint_tui.errors import Exit, Unavailable
from checkpoint_tui.ops.devserver import ensure_devserver
from checkpoint_tui.ops.exit_reason import (
    TAIL_BYTES,
    describe_exit,
    last_log_line,
    log_size,
    signal_label,
    startup_death,
)
from checkpoint_tui.ops.modelserver import ServerDied, ensure_model_server, running, smoke
from checkpoint_tui.settings import Settings

# Say something, then die as told: "SIGILL"/"SIGSEGV" (no core file), or an exit code.
DIE = """
import os, resource, signal, sys, time
print({line!r}, flush=True)
print("", flush=True)
time.sleep({delay})
how = {how!r}
if how.startswith("SIG"):
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.kill(os.getpid(), getattr(signal, how))
    time.sleep(5)
sys.exit(int(how))
"""

# A stand-in llama-server that answers /health and one chat completion, until SIGTERM.
FAKE_LLAMA = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(BaseHTTPRequestHandler):
    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._send({"status": "ok"})
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send({"choices": [{"message": {"content": "OK"}}], "usage": {"completion_tokens": 2}})
    def log_message(self, *args):
        pass
print("main: server is listening", flush=True)
HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def script(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def dying(tmp_path: Path, how: str, line: str = "llama threadpool init, n_threads = 2", delay: float = 0.3) -> Path:
    return script(tmp_path, "die.py", DIE.format(line=line, how=how, delay=delay))


@pytest.fixture
def model_home(tmp_path: Path) -> Settings:
    settings = Settings(home=tmp_path / "home")
    settings.ensure_dirs()
    (tmp_path / "fake.gguf").write_bytes(b"GGUF")
    return settings


# --- exit_reason on its own


def test_signals_are_named_with_their_meaning():
    assert signal_label(signal.SIGILL) == "SIGILL (illegal instruction)"
    assert describe_exit(-signal.SIGILL) == "was killed by SIGILL (illegal instruction)"
    assert describe_exit(-signal.SIGSEGV) == "was killed by SIGSEGV (segmentation fault)"
    assert describe_exit(1) == "exited with code 1"
    assert describe_exit(0) == "exited with code 0"
    assert "128 + SIGILL (illegal instruction)" in describe_exit(132)  # through a shell
    assert describe_exit(255) == "exited with code 255"
    assert describe_exit(None) == "ended (exit status unknown)"


def test_last_log_line_skips_blanks_escapes_and_control_characters(tmp_path: Path):
    log = tmp_path / "x.log"
    log.write_bytes(b"first\n\x1b[31merror: bad \x07thing\x1b[0m\r\n\n   \n----\n\x00\n")
    assert last_log_line(log) == "error: bad thing"
    assert last_log_line(tmp_path / "missing.log") is None
    log.write_bytes(b"\n\n  \n")
    assert last_log_line(log) is None


def test_last_log_line_reads_only_this_start_and_only_the_tail(tmp_path: Path):
    log = tmp_path / "x.log"
    log.write_text("a previous run's last line\n")
    start = log_size(log)
    assert last_log_line(log, start) is None  # this start wrote nothing: an older line would mislead
    with open(log, "a") as fh:
        fh.write("x" * (TAIL_BYTES * 3) + "\n" + "y" * 1000 + "\nthe end\n")
    assert last_log_line(log, start) == "the end"
    with open(log, "a") as fh:
        fh.write("z" * 5000 + "\n")
    line = last_log_line(log, start)
    assert line is not None and len(line) <= 200 and line.startswith("zzz")


@pytest.mark.parametrize(("how", "named"), [("SIGILL", "SIGILL (illegal instruction)"), ("SIGSEGV", "SIGSEGV")])
def test_a_real_child_killed_by_a_signal(tmp_path: Path, how: str, named: str):
    log = tmp_path / "child.log"
    log.write_text("stale line from before\n")
    start = log_size(log)
    with open(log, "ab") as out:
        rc = subprocess.run([sys.executable, str(dying(tmp_path, how, delay=0))], stdout=out, stderr=out).returncode
    assert rc == -getattr(signal, how)
    message = startup_death("the thing", rc, log, start)
    assert f"the thing was killed by {named}" in message
    assert "last log line: 'llama threadpool init, n_threads = 2'" in message
    assert "stale" not in message and "\n" not in message


# --- the real callers


def test_model_server_killed_by_sigill_names_the_signal_and_the_log_line(tmp_path: Path, model_home: Settings):
    (model_home.run_dir / "model.log").write_text("an old run: all fine\n")
    with pytest.raises(ServerDied) as caught:
        ensure_model_server(model_home, [sys.executable, str(dying(tmp_path, "SIGILL"))], tmp_path / "fake.gguf")
    message = str(caught.value)
    assert message.startswith("llama-server was killed by SIGILL (illegal instruction) during start-up")
    assert "last log line: 'llama threadpool init, n_threads = 2'" in message
    assert "make model" in message  # the hint: a build for another CPU
    assert caught.value.exit_code == Exit.UNAVAILABLE
    assert running(model_home) is None
    assert not (model_home.run_dir / "modelserver.json").exists()


def test_model_server_plain_exit_code(tmp_path: Path, model_home: Settings):
    fail = dying(tmp_path, "1", line="error: failed to load model 'fake.gguf'")
    with pytest.raises(ServerDied) as caught:
        ensure_model_server(model_home, [sys.executable, str(fail)], tmp_path / "fake.gguf")
    message = str(caught.value)
    assert "llama-server exited with code 1" in message
    assert "last log line: \"error: failed to load model 'fake.gguf'\"" in message
    assert "make model" not in message  # not a wrong-CPU death


def test_smoke_reports_a_death_and_stops_what_it_started(tmp_path: Path, model_home: Settings):
    with pytest.raises(ServerDied, match="SIGSEGV"):
        smoke(model_home, [sys.executable, str(dying(tmp_path, "SIGSEGV"))], tmp_path / "fake.gguf")
    fake = script(tmp_path, "fake_llama.py", FAKE_LLAMA)
    result = smoke(model_home, [sys.executable, str(fake)], tmp_path / "fake.gguf")
    assert result.content == "OK" and result.tokens == 2
    assert running(model_home) is None
    left = [p for p in psutil.process_iter(["cmdline", "status"]) if str(fake) in " ".join(p.info["cmdline"] or [])]
    assert all(p.info["status"] == psutil.STATUS_ZOMBIE for p in left), left


def test_dev_server_death_by_signal_is_named(tmp_path: Path):
    """A stand-in `temporal` (this Python, run as `temporal server start-dev ...` in run/, where a
    script named `server` waits for it) that writes a line and dies of SIGSEGV."""
    settings = Settings(home=tmp_path / "home", temporal_bin=str(tmp_path / "temporal"))
    settings.ensure_dirs()
    os.symlink(sys.executable, tmp_path / "temporal")
    dying(tmp_path, "SIGSEGV", line="unable to start server: boom").rename(settings.run_dir / "server")
    with pytest.raises(Unavailable) as caught:
        ensure_devserver(settings, timeout=20)
    message = str(caught.value)
    assert "the Temporal dev server was killed by SIGSEGV (segmentation fault)" in message
    assert "last log line: 'unable to start server: boom'" in message


def test_smoke_entry_point_exit_codes(monkeypatch: pytest.MonkeyPatch):
    """`make model` rebuilds llama.cpp on exit 4 (the server died) and only then."""
    from checkpoint_tui.ops import modelserver

    def died(settings: Settings) -> None:
        raise ServerDied("llama-server was killed by SIGILL (illegal instruction) during start-up")

    def no_answer(settings: Settings) -> None:
        raise Unavailable("llama-server not healthy within 60 s")

    monkeypatch.setattr(modelserver, "smoke", died)
    assert modelserver.main(["--smoke"]) == 4
    monkeypatch.setattr(modelserver, "smoke", no_answer)
    assert modelserver.main(["--smoke"]) == 3
