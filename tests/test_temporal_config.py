"""Temporal's environment configuration (#54): a profile of a TOML file and the TEMPORAL_* variables, in
Temporal's precedence under the lab's flags; read only when asked for; what the lab's children get; no
secret of the file in a message or on a command line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from checkpoint_tui.cli.commands import temporal_from
from checkpoint_tui.cli.parser import build_parser
from checkpoint_tui.errors import UsageError
from checkpoint_tui.ops.temporal import refusal
from checkpoint_tui.ops.user_worker import worker_connection, worker_env
from checkpoint_tui.settings import ConnectionOptions, Settings
from checkpoint_tui.settings.temporal_config import load_target

KEY = "sk-staging-key-not-to-be-seen"
TOML = f"""
[profile.default]
address = "127.0.0.1:7233"

[profile.staging]
address = "temporal.staging.test:7233"
namespace = "payments"
api_key = "{KEY}"

[profile.staging.tls]
server_name = "frontend.staging.test"
server_ca_cert_path = "/etc/staging/ca.pem"
client_cert_data = "-----BEGIN CERTIFICATE-----inline-----END CERTIFICATE-----"
client_key_path = "/etc/staging/client.key"
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "temporal.toml"
    path.write_text(TOML)
    return path


def test_nothing_asked_nothing_read_and_the_embedded_default_stays(config, monkeypatch):
    monkeypatch.delenv("TEMPORAL_PROFILE", raising=False)
    assert load_target(None, None, {}) is None
    # a file and its variables in the environment, but nothing naming a profile, a file or an address
    assert load_target(None, None, {"TEMPORAL_NAMESPACE": "x", "TEMPORAL_TLS_SERVER_NAME": "y"}) is None


def test_a_profile_s_paths_and_inline_data_under_the_environment_and_the_flags(config):
    target = load_target("staging", str(config), {"TEMPORAL_NAMESPACE": "payments-canary"})
    assert target is not None and target.address == "temporal.staging.test:7233"
    assert target.namespace == "payments-canary"  # the environment over the file
    conn = target.connection
    assert (conn.api_key, conn.tls_server_name, conn.tls_ca, conn.tls_key) == (
        KEY,
        "frontend.staging.test",
        "/etc/staging/ca.pem",
        "/etc/staging/client.key",
    )
    assert conn.tls_cert is None and conn.tls_cert_data.startswith(b"-----BEGIN") and conn.tls
    assert KEY not in repr(conn) and b"inline" not in repr(conn).encode()
    args = build_parser().parse_args(
        ["--config-file", str(config), "--profile", "staging", "--namespace", "ops", "--tls-server-name", "n", "status"]
    )
    address, namespace, merged = temporal_from(args)
    assert (address, namespace, merged.tls_server_name) == ("temporal.staging.test:7233", "ops", "n")
    assert merged.api_key == KEY


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (f'[profile.staging]\napi_key = "{KEY}"\nnamespace = \n', "TOML parse error at line 3"),
        ('[profile.other]\naddress = "h:1"\n', "Profile 'staging' not found"),
    ],
)
def test_a_file_that_cannot_be_read_is_one_line_that_repeats_none_of_it(tmp_path, text, said):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        load_target("staging", str(path), {})
    message = str(err.value)
    assert said in message and KEY not in message and "\n" not in message, message
    for bad, why in ((tmp_path, "not a regular file"), (tmp_path / "none.toml", "No such file")):
        with pytest.raises(UsageError, match=why):
            load_target("staging", str(bad), {})
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * ((1 << 20) + 1))
    with pytest.raises(UsageError, match="over 1 MiB"):
        load_target("staging", str(big), {})


def test_a_child_gets_the_lab_s_one_answer_in_its_environment_never_on_its_command_line(config, tmp_path, monkeypatch):
    for name, value in {"TEMPORAL_PROFILE": "staging", "TEMPORAL_CONFIG_FILE": str(config)}.items():
        monkeypatch.setenv(name, value)  # the caller's: a child must not read them again
    target = load_target(None, None)
    assert target is not None
    settings = Settings(home=tmp_path / "h", temporal_address=target.address, connection=target.connection)
    env = settings.child_env()
    assert "TEMPORAL_PROFILE" not in env and "TEMPORAL_CONFIG_FILE" not in env
    assert env["CHECKPOINT_TLS_CLIENT_CERT_DATA"].startswith("-----BEGIN") and env["TEMPORAL_API_KEY"] == KEY
    flags = settings.server_flags()
    assert "--tls-server-name" in flags and not any("BEGIN" in f or KEY in f for f in flags)
    user = replace(settings, worker_cmd=("python", "w.py"))
    wenv = worker_env(user, target.address or "")
    assert wenv["TEMPORAL_TLS_SERVER_NAME"] == "frontend.staging.test" and wenv["TEMPORAL_TLS"] == "true"
    assert wenv["TEMPORAL_TLS_CLIENT_CERT_DATA"].startswith("-----BEGIN")
    assert "CHECKPOINT_TLS_CLIENT_CERT_DATA" not in wenv  # ours is for our own processes
    embedded = Settings(home=tmp_path / "e", connection=target.connection).child_env()
    assert "CHECKPOINT_TLS_CLIENT_CERT_DATA" not in embedded  # the lab's own dev server: none of it


def test_through_the_hop_a_worker_speaks_plain_and_through_a_proxy_tls_with_the_server_s_name(tmp_path):
    conn = ConnectionOptions(tls_ca="/ca.pem", api_key=KEY)
    base = Settings(home=tmp_path / "h", temporal_address="temporal.staging.test:7233", connection=conn)
    hop = worker_connection(replace(base, worker_address="127.0.0.1:5000", worker_plaintext=True))
    assert (hop.tls, hop.tls_disabled, hop.api_key) == (False, True, KEY)
    proxied = worker_connection(replace(base, worker_address="127.0.0.1:5000"))
    assert proxied.tls and proxied.tls_server_name == "temporal.staging.test"
    assert worker_connection(base) is conn


@pytest.mark.parametrize(
    ("message", "names"),
    [
        ("status: 401 Unauthorized, metadata: ...", "API key"),
        ('Status { code: Unauthenticated, message: "Request unauthorized." }', "API key"),
        ("while receiving response with status: 400 Bad Request", "client certificate"),
        ("InvalidCertificate(UnknownIssuer)", "not signed by a CA the lab trusts"),
        ("InvalidCertificate(NotValidForNameContext { expected: IpAddress(..) })", "TLS server name"),
        ('ConnectError("tcp connect error", 127.0.0.1:40312, Connection refused)', None),  # a port, not a 403
    ],
)
def test_a_refused_connection_names_which_credential(message, names):
    said = refusal(message, ConnectionOptions(tls_cert="c.pem", tls_key="k.pem", api_key=KEY))
    assert (said is None) if names is None else (names in (said or "") and KEY not in said), said


def test_a_process_of_the_lab_reads_inline_data_only_from_its_parent_lab(tmp_path, monkeypatch):
    from checkpoint_tui.settings import load_settings

    monkeypatch.setenv("TEMPORAL_TLS_CLIENT_CERT_DATA", "a shell's, not the lab's")
    monkeypatch.setenv("CHECKPOINT_TLS_CLIENT_CERT_DATA", "CERT")
    external = load_settings(tmp_path / "h", "frontend.staging.test:7233", connection=ConnectionOptions())
    assert external.connection.tls_cert_data == b"CERT"  # what a parent lab passed, under its own name
    assert load_settings(tmp_path / "h").connection.tls_cert_data is None  # its own dev server: none


def test_the_hop_s_upstream_tls_for_an_api_key_alone_and_for_a_profile_s_certificates(tmp_path):
    """An API key alone (Temporal Cloud's way) is TLS with the system's roots: the hop must take that as
    it takes certificates (it read the SDK's `tls=True` as a TLSConfig and crashed)."""
    from checkpoint_tui.proof.nemeses.hop import UpstreamTls, upstream_tls

    cloud = Settings(
        home=tmp_path / "h", temporal_address="ns.acct.tmprl.cloud:7233", connection=ConnectionOptions(api_key=KEY)
    )
    assert upstream_tls(cloud) == UpstreamTls(server_name="ns.acct.tmprl.cloud")
    ca = tmp_path / "ca.pem"
    ca.write_bytes(b"CA")
    own = replace(cloud, connection=ConnectionOptions(tls_ca=str(ca), tls_server_name="frontend.test", api_key=KEY))
    assert upstream_tls(own) == UpstreamTls(ca=b"CA", server_name="frontend.test")


@pytest.mark.parametrize(("said", "tls"), [({"tls_disabled": True}, False), ({"tls_enabled": True}, True)])
def test_a_child_of_the_lab_keeps_the_profile_s_tls_switch(tmp_path, monkeypatch, said, tls):
    """A profile's `tls = false` beside an API key (a plaintext front that checks keys), or TLS with the
    system's roots and no key: the supervisor child of the lab gets only an address and the key, and
    derived TLS from the key alone (on, then off) until the switch traveled with them."""
    from checkpoint_tui.settings import load_settings

    conn = ConnectionOptions(api_key=KEY if not tls else None, **said)
    lab = Settings(home=tmp_path / "h", temporal_address="temporal.staging.test:7233", connection=conn)
    assert lab.connection.tls is tls
    for name, value in lab.child_env().items():
        monkeypatch.setenv(name, value)
    child = load_settings(tmp_path / "h", "temporal.staging.test:7233", connection=ConnectionOptions())
    assert child.connection.tls is tls and child.connection.api_key == conn.api_key
    assert "CHECKPOINT_TEMPORAL_TLS" not in worker_env(replace(lab, worker_cmd=("python", "w.py")), "a:1")
