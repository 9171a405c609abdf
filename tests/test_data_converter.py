"""#54, a team's data converter (--data-converter MODULE:ATTR): the lab starts runs and reads histories
through it, in a process of its own. The codec's round trip, what it cannot read (named, never
guessed), a converter that fails to load, and chaos on examples/codec_worker (a payload converter of
its own and an AES-GCM codec): the run's payloads are encrypted in Temporal, the audit names its tool
calls, each email once."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import DataConverter

from checkpoint_tui.core.history_codec import Found, decoded, payloads_in
from checkpoint_tui.errors import Unavailable, UsageError
from checkpoint_tui.ops.codec_client import HttpCodec
from checkpoint_tui.ops.codec_count import UNDECODABLE
from checkpoint_tui.ops.remote_codec import RemoteCodec
from checkpoint_tui.settings.codec import CodecServer
from checkpoint_tui.waiting import wait_until_sync
from conftest import run_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "codec_worker"
ROT = '''
import base64
from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter, PayloadCodec

print("a team's module that prints when imported")


class Rot(PayloadCodec):
    """Base64 of the payload under its own encoding: only payloads it wrote are read back."""

    async def encode(self, payloads):
        rot = {"encoding": b"binary/rot"}
        return [Payload(metadata=rot, data=base64.b64encode(p.SerializeToString())) for p in payloads]

    async def decode(self, payloads):
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != b"binary/rot":
                raise ValueError("not a rot payload")
            inner = Payload()
            inner.ParseFromString(base64.b64decode(p.data))
            out.append(inner)
        return out


def make():
    return DataConverter(payload_codec=Rot())
'''


def _codec(tmp_path: Path, spec: str = "team:make") -> RemoteCodec:
    (tmp_path / "team.py").write_text(ROT)
    return RemoteCodec(spec, tmp_path, {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})


async def test_the_team_s_codec_round_trips_the_lab_s_json_and_names_what_it_cannot_read(tmp_path: Path):
    codec = _codec(tmp_path)
    try:
        plain = DataConverter.default.payload_converter.to_payloads([{"turns": 3}, "hi"])
        sealed = await codec.encode(plain)
        assert [p.metadata["encoding"] for p in sealed] == [b"binary/rot"] * 2 and sealed[0].data != plain[0].data
        stranger = Payload(metadata={"encoding": b"binary/other"}, data=b"\x00secret")
        back = await codec.decode([*sealed, stranger])
        assert DataConverter.default.payload_converter.from_payloads(back[:2]) == [{"turns": 3}, "hi"]
        assert back[2].metadata["encoding"] == UNDECODABLE and back[2].data == stranger.data  # kept, named
        assert back[2].metadata["error"].startswith(b"ValueError: not a rot payload")
        assert codec.undecodable == 1 and codec.converter and codec.converter.endswith(", Rot")
    finally:
        await codec.close()


@pytest.mark.parametrize(
    ("spec", "said"), [("team:nothing", "AttributeError"), ("absent_module:X", "ModuleNotFoundError")]
)
async def test_a_converter_that_does_not_load_is_one_line(tmp_path: Path, spec: str, said: str):
    codec = _codec(tmp_path, spec)
    with pytest.raises(UsageError) as err:
        await codec.encode(DataConverter.default.payload_converter.to_payloads([1]))
    assert said in str(err.value) and "\n" not in str(err.value)
    assert codec._proc is None  # nothing left running


HANGS = """
import time
from temporalio.converter import DataConverter, PayloadCodec


class Hangs(PayloadCodec):
    async def encode(self, payloads):
        return list(payloads)

    async def decode(self, payloads):
        time.sleep(600)  # a codec that never answers (a lock, a network call): the lab must not wait with it


CONVERTER = DataConverter(payload_codec=Hangs())
"""


async def test_a_converter_that_stops_answering_is_one_line_and_its_process_is_gone(tmp_path: Path, monkeypatch):
    import checkpoint_tui.ops.remote_codec as remote

    monkeypatch.setattr(remote, "ANSWER_WAIT_S", 1.0)
    (tmp_path / "hangs.py").write_text(HANGS)
    codec = RemoteCodec("hangs:CONVERTER", tmp_path, {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    plain = DataConverter.default.payload_converter.to_payloads([1])
    await codec.encode(plain)  # started, and answering
    pid = codec._proc.pid if codec._proc is not None else 0
    with pytest.raises(Unavailable, match="stopped answering"):
        await codec.decode(plain)
    assert codec._proc is None
    assert wait_until_sync(lambda: not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), 10)  # killed
    await codec.close()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1]
    except OSError:
        return "Z"


def test_every_payload_of_an_event_is_found_and_search_attributes_are_not():
    from temporalio.api.history.v1 import HistoryEvent

    ev = HistoryEvent()
    started = ev.workflow_execution_started_event_attributes
    started.input.payloads.add(data=b"1")
    started.memo.fields["m"].data = b"2"
    started.search_attributes.indexed_fields["s"].data = b"3"  # the server's index: never a codec's
    started.header.fields["h"].data = b"4"
    started.continued_failure.cause.encoded_attributes.data = b"5"
    found = Found()
    payloads_in(ev, found)
    assert sorted(p.data for p in found.payloads) == [b"1", b"2", b"4", b"5"] and found.left_out == 0


async def test_the_audit_reads_decoded_copies_and_what_temporal_holds_stays_as_it_is(tmp_path: Path):
    """Replay runs the team's code on the history and exports write it: both get it as Temporal holds it
    (encrypted), never the lab's decoded JSON; payloads past the lab's bounds are counted as not read."""
    from temporalio.api.history.v1 import HistoryEvent

    codec = _codec(tmp_path)
    try:
        sealed = await codec.encode(DataConverter.default.payload_converter.to_payloads([{"to": "a@b"}]))
        ev = HistoryEvent()
        ev.workflow_execution_started_event_attributes.input.payloads.add().CopyFrom(sealed[0])
        client = SimpleNamespace(data_converter=DataConverter(payload_codec=codec))
        [copy] = await decoded(client, [ev])  # type: ignore[arg-type]
        assert copy is not ev and ev.workflow_execution_started_event_attributes.input.payloads[0] == sealed[0]
        shown = copy.workflow_execution_started_event_attributes.input.payloads[0]
        assert DataConverter.default.payload_converter.from_payloads([shown]) == [{"to": "a@b"}]
        assert codec.undecodable == 0
        deep = HistoryEvent()
        failure = deep.workflow_execution_failed_event_attributes.failure
        for _ in range(40):  # a cause chain past the lab's nesting bound
            failure = failure.cause
        failure.encoded_attributes.data = b"x"
        await decoded(client, [deep])  # type: ignore[arg-type]
        assert codec.undecodable == 1 and "past the lab's bounds" in (codec.first_error or "")
    finally:
        await codec.close()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--data-converter", "import os; os.system('x')"], "MODULE:ATTR"),
        (["--data-converter", "codec:DATA_CONVERTER"], "for your own workers"),
    ],
)
def test_a_bad_data_converter_flag_is_one_line_exit_2(tmp_path: Path, flags: list[str], said: str):
    done = run_cli("--home", str(tmp_path / "h"), *flags, "chaos", "--kills", "3")
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


async def test_chaos_on_an_encrypting_team_converter_names_its_tools_and_sends_each_email_once(
    tmp_path: Path, temporal_address: str
):
    home, report_path = tmp_path / "home", tmp_path / "report.json"
    lab = ["--home", str(home), "--temporal-address", temporal_address, "--worker-cmd", f"{sys.executable} worker.py"]
    lab += ["--task-queue", f"codec-{tmp_path.name}"[:100]]  # the session's server: a queue of its own
    try:
        done = run_cli(
            *lab,
            "--data-converter",
            "codec:DATA_CONVERTER",
            "chaos",
            "--workflow",
            "CodecMailer",
            "--input",
            json.dumps({"turns": 6, "pace": 0.2}),  # a server the lab did not start: kills of workers only
            "--aim",
            "tool",
            "--kills",
            "3",
            "--seed",
            "1",
            "--json",
            str(report_path),
            cwd=EXAMPLE,
            timeout=240,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        report = json.loads(report_path.read_text())
        said = "--data-converter codec:DATA_CONVERTER (TeamPayloadConverter, EncryptionCodec)"
        assert report["temporal"]["data_converter"] == said
        assert report["temporal"]["undecodable_payloads"] == 0
        assert "payloads through --data-converter codec:DATA_CONVERTER" in done.stdout
        audit = report["audit"]
        assert audit["framework"] == "declared" and audit["model_requests"] == 6, audit
        assert "(declared: 6 model requests, 6 tool calls)" in done.stdout
        sent = (home / "codec-out" / "outbox.jsonl").read_text().splitlines()
        assert sorted(json.loads(line)["call_id"] for line in sent) == sorted(f"call-{i}" for i in range(1, 7))
        # what Temporal holds is the team's: encrypted, unreadable without its converter
        client = await Client.connect(temporal_address)
        first = await client.get_workflow_handle(report["run_id"]).fetch_history()
        started = first.events[0].workflow_execution_started_event_attributes
        assert started.input.payloads[0].metadata["encoding"] == b"binary/encrypted"
        assert b"turns" not in started.input.payloads[0].data
    finally:
        run_cli("--home", str(home), "stop", timeout=120)


AUTH = "Bearer team-token-for-tests"  # what the example's codec server wants (CODEC_SERVER_AUTH)


@contextlib.contextmanager
def codec_server(home: Path) -> Iterator[str]:
    """examples/codec_worker/codec_server.py on a free loopback port, its key under `home`; its URL."""
    out = home / "codec-server.out"
    home.mkdir(parents=True, exist_ok=True)
    env = {"CHECKPOINT_HOME": str(home), "CODEC_SERVER_AUTH": AUTH, "PATH": "/usr/bin:/bin"}
    with open(out, "wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "codec_server.py", "--port", "0"],
            cwd=EXAMPLE,
            env={**env, "PYTHONPATH": ":".join(sys.path)},
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        assert wait_until_sync(lambda: "listening" in out.read_text() or proc.poll() is not None, 15)
        yield "http://" + out.read_text().split("listening ", 1)[1].split()[0]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


async def test_a_codec_server_round_trips_and_what_it_refuses_is_named_without_its_auth(tmp_path: Path):
    with codec_server(tmp_path) as url:
        codec = HttpCodec(CodecServer(url, AUTH), "default")
        plain = DataConverter.default.payload_converter.to_payloads([{"turns": 3}])
        sealed = await codec.encode(plain)
        assert sealed[0].metadata["encoding"] == b"binary/encrypted" and b"turns" not in sealed[0].data
        assert DataConverter.default.payload_converter.from_payloads(await codec.decode(sealed)) == [{"turns": 3}]
        stranger = HttpCodec(CodecServer(url, "Bearer wrong"), "default")
        kept = await stranger.decode(sealed)
        assert kept[0].metadata["encoding"] == UNDECODABLE and kept[0].data == sealed[0].data
        assert stranger.undecodable == 1 and stranger.first_error == "HTTP 401 from /decode"
        with pytest.raises(UsageError) as err:  # a refused credential: exit 2, said as that
            await stranger.encode(plain)
        assert "refused the lab: HTTP 401" in str(err.value) and "wrong" not in str(err.value)  # exit 2, no secret


@pytest.mark.parametrize(
    ("env", "flags", "said"),
    [
        ({"TEMPORAL_CODEC_ENDPOINT": "ftp://codec"}, [], "TEMPORAL_CODEC_ENDPOINT: an http:// or https://"),
        ({"TEMPORAL_CODEC_ENDPOINT": "http://me:s3cret@codec"}, [], "no user or password in the URL"),
        ({}, ["--codec-endpoint", "http://codec:99999"], "--codec-endpoint: not a URL"),
        ({"TEMPORAL_CODEC_ENDPOINT": "http://codec"}, ["--data-converter", "codec:DATA_CONVERTER"], "one of them"),
    ],
)
def test_a_bad_codec_endpoint_is_one_line_exit_2(tmp_path: Path, env: dict, flags: list[str], said: str):
    worker = ["--worker-cmd", f"{sys.executable} worker.py"]
    run = ["chaos", "--workflow", "CodecMailer", "--kills", "3"]
    done = run_cli("--home", str(tmp_path / "h"), *worker, *flags, *run, env=env, cwd=EXAMPLE)
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "s3cret" not in done.stdout + done.stderr


def test_chaos_through_the_team_s_codec_server_passes_and_names_it(tmp_path: Path, temporal_address: str):
    home, report_path = tmp_path / "home", tmp_path / "report.json"
    lab = ["--home", str(home), "--temporal-address", temporal_address]
    with codec_server(home) as url:
        env = {"TEMPORAL_CODEC_ENDPOINT": url, "TEMPORAL_CODEC_AUTH": AUTH, "CODEC_EXAMPLE_CONVERTER": "json"}
        try:
            done = run_cli(
                *lab,
                "--worker-cmd",
                f"{sys.executable} worker.py",
                "--task-queue",
                f"codec-{tmp_path.name}"[:100],
                "chaos",
                "--workflow",
                "CodecMailer",
                "--input",
                json.dumps({"turns": 6, "pace": 0.2}),
                "--kills",
                "3",
                "--aim",
                "tool",
                "--json",
                str(report_path),
                env=env,
                cwd=EXAMPLE,
                timeout=240,
            )
        finally:
            run_cli("--home", str(home), "stop", timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads(report_path.read_text())
    assert report["temporal"]["data_converter"] == f"the codec server {url}"
    assert report["temporal"]["undecodable_payloads"] == 0 and AUTH not in report_path.read_text()
    assert report["audit"]["model_requests"] == 6 and AUTH not in done.stdout + done.stderr


@contextlib.contextmanager
def echo_server(redirect_to: str | None = None) -> Iterator[str]:
    """A codec server that hands every payload back as it got it (a passthrough, a wrong key's), or
    answers every request with a redirect to `redirect_to`."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str | None] = []

    class Echo(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            seen.append(self.headers.get("Authorization"))
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(302 if redirect_to else 200)
            if redirect_to:
                self.send_header("Location", redirect_to)
            self.send_header("Content-Length", str(0 if redirect_to else len(body)))
            self.end_headers()
            self.wfile.write(b"" if redirect_to else body)

        def log_message(self, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_a_codec_server_that_reads_nothing_or_redirects_is_counted_never_followed():
    sealed = Payload(metadata={"encoding": b"binary/encrypted"}, data=b"\x00secret")
    with echo_server() as url:
        codec = HttpCodec(CodecServer(url), "default")
        [back] = await codec.decode([sealed])
        assert back.metadata["encoding"] == UNDECODABLE and codec.undecodable == 1  # handed back still sealed
        assert "still 'binary/encrypted' after decoding" in (codec.first_error or "")
    with echo_server() as elsewhere, echo_server(redirect_to=f"{elsewhere}/decode") as url:
        codec = HttpCodec(CodecServer(url, AUTH), "default")
        [back] = await codec.decode([sealed])
        assert back.metadata["encoding"] == UNDECODABLE and codec.first_error == "HTTP 302 from /decode"
