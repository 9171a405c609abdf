"""A staging cluster behind TLS, a client certificate and an API key (#54), configured only by a profile
in a TOML file: Debian's nginx on loopback in front of the session's dev server (tests/tls_front.py).
chaos and gameday pass through it on examples/user_worker, assisted failover included (its supervisor
connects as the lab does); a wrong key, a stranger's certificate or an untrusted server is one line,
exit 2, naming which, before anything starts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import run_cli
from tls_front import KEY, TlsFront, nginx_binary

WORKER = Path(__file__).resolve().parent.parent / "examples" / "user_worker" / "worker.py"
pytestmark = pytest.mark.skipif(
    nginx_binary() is None, reason="nginx (Debian's package; `make test` extracts it into .venv/nginx), not here"
)


@pytest.fixture(scope="module")
def front(tmp_path_factory, temporal_address) -> Iterator[TlsFront]:
    binary = nginx_binary()
    assert binary is not None
    running = TlsFront(tmp_path_factory.mktemp("front"), temporal_address).start(binary)
    try:
        yield running
    finally:
        running.stop()


def lab(home: Path, config: Path) -> list[str]:
    """A home configured only by the profile: no address, TLS or key flag."""
    worker = f"{sys.executable} {WORKER}"
    return ["--home", str(home), "--config-file", str(config), "--profile", "staging", "--worker-cmd", worker]


def test_chaos_and_gameday_pass_through_the_front_configured_by_a_profile_alone(front: TlsFront, tmp_path: Path):
    home, report = tmp_path / "home", tmp_path / "chaos.json"
    flags = lab(home, front.profile(tmp_path / "temporal.toml"))
    run_input = json.dumps({"count": 5, "pace": 0.2})
    try:
        chaos = run_cli(
            *flags,
            *("chaos", "--workflow", "SendLines", "--input", run_input, "--seed", "3", "--kills", "4"),
            *("--json", str(report)),
            timeout=240,
        )
        day = run_cli(
            *flags,
            *("gameday", "--workflow", "SendLines", "--input", json.dumps({"count": 16, "pace": 0.3})),
            *("--runs", "2", "--scenarios", "kill-all", "--out", str(tmp_path / "day")),
            timeout=300,
        )
    finally:
        run_cli(*flags, "stop", timeout=60)
    assert chaos.returncode == 0, chaos.stdout[-3000:] + chaos.stderr[-2000:]
    doc = json.loads(report.read_text())
    assert doc["temporal"] == {"address": front.address, "namespace": "default", "started_by_lab": False}
    worker_kills = [k for k in doc["kills"] if k["kind"].startswith("worker-")]
    assert len(worker_kills) == 2 and all(k["restart_s"] is not None and k["restart_s"] < 2.0 for k in worker_kills)
    assert day.returncode == 0 and "1/1 experiments held" in day.stdout, day.stdout[-3000:] + day.stderr[-2000:]
    assert KEY not in chaos.stdout + chaos.stderr + day.stdout + day.stderr
    assert not any(KEY in p.read_text(errors="replace") for p in (home / "run").glob("*.log"))


@pytest.mark.parametrize(
    ("profile", "said"),
    [
        ({"key": "sk-wrong"}, "it rejected the API key"),
        ({"cert": "stranger"}, "it rejected the client certificate"),
        ({"ca": "stranger.pem"}, "its certificate is not signed by a CA the lab trusts"),
    ],
)
def test_a_wrong_key_or_certificate_is_one_line_exit_2_naming_which(front, tmp_path, profile, said):
    home = tmp_path / "home"
    flags = lab(home, front.profile(tmp_path / "temporal.toml", **profile))
    out = run_cli(*flags, "chaos", "--workflow", "SendLines", "--kills", "3", timeout=120)
    assert out.returncode == 2, out.stdout[-2000:] + out.stderr[-2000:]
    (line,) = out.stderr.strip().splitlines()
    assert said in line and front.address in line and "sk-wrong" not in line and KEY not in line, line
    assert not (home / "run" / "worker.log").exists()  # refused before any worker started
