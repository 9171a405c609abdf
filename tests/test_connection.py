"""Cluster connection options: mTLS files and the API key reach the SDK, and only there."""

from __future__ import annotations

from temporalio.service import TLSConfig

from checkpoint_tui.ops.procs import free_port
from checkpoint_tui.settings import TEMPORAL_API_KEY_ENV, ConnectionOptions, Settings, load_settings
from conftest import run_cli


def test_tls_files_and_api_key_become_client_options(tmp_path, monkeypatch):
    cert, key, ca = (tmp_path / n for n in ("c.pem", "k.pem", "ca.pem"))
    cert.write_bytes(b"CERT")
    key.write_bytes(b"KEY")
    ca.write_bytes(b"CA")
    monkeypatch.setenv(TEMPORAL_API_KEY_ENV, "tk-not-a-real-key")
    opts = load_settings(tmp_path, connection=ConnectionOptions(str(cert), str(key), str(ca))).connection
    assert "tk-not-a-real-key" not in repr(opts)  # a secret is never in a repr (logs, tracebacks)
    kwargs = opts.client_kwargs()
    assert isinstance(kwargs["tls"], TLSConfig)
    assert (kwargs["tls"].client_cert, kwargs["tls"].client_private_key, kwargs["tls"].server_root_ca_cert) == (
        b"CERT",
        b"KEY",
        b"CA",
    )
    assert kwargs["api_key"] == "tk-not-a-real-key"
    args = opts.worker_args()
    assert args == ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(ca)]
    assert "tk-not-a-real-key" not in " ".join(args)  # the key never goes on a command line


def test_api_key_alone_implies_tls(monkeypatch, tmp_path):
    monkeypatch.setenv(TEMPORAL_API_KEY_ENV, "tk-x")
    settings = load_settings(tmp_path)
    assert settings.connection.client_kwargs() == {"api_key": "tk-x", "tls": True}
    assert settings.child_env()[TEMPORAL_API_KEY_ENV] == "tk-x"  # a worker gets it through its environment
    monkeypatch.delenv(TEMPORAL_API_KEY_ENV)
    assert load_settings(tmp_path).connection.client_kwargs() == {}


def test_bad_certificate_path_is_a_clear_error(tmp_path):
    out = run_cli(
        "--home",
        str(tmp_path),
        "--temporal-address",
        f"127.0.0.1:{free_port()}",
        "--tls-cert",
        "/nonexistent/client.pem",
        "--tls-key",
        "/nonexistent/client.key",
        "start",
        "--steps",
        "1",
    )
    assert out.returncode == 2  # a flag naming a file that cannot be read: usage
    assert "cannot read --tls-cert /nonexistent/client.pem" in out.stderr and "Traceback" not in out.stderr


def test_cert_without_key_is_a_clear_error(tmp_path):
    cert = tmp_path / "c.pem"
    cert.write_bytes(b"CERT")
    out = run_cli("--home", str(tmp_path), "--temporal-address", "127.0.0.1:1", "--tls-cert", str(cert), "status")
    assert out.returncode == 0 and "no runs yet" in out.stdout  # status needs no connection to say so
    out = run_cli(
        "--home",
        str(tmp_path),
        "--temporal-address",
        f"127.0.0.1:{free_port()}",
        "--tls-cert",
        str(cert),
        "start",
        "--steps",
        "1",
    )
    assert out.returncode == 2 and "needs both --tls-cert and --tls-key" in out.stderr


def test_hosts_on_one_postgres_ledger_derive_one_task_queue(tmp_path):
    """Whatever user, password or default-port spelling each host uses, one database is one queue."""
    from checkpoint_tui.settings import Settings

    a = Settings(home=tmp_path / "a", ledger_url="postgresql://alice:secret@db.internal/ledger")
    b = Settings(home=tmp_path / "b", ledger_url="postgresql://bob@db.internal:5432/ledger")
    other = Settings(home=tmp_path / "c", ledger_url="postgresql://bob@db.internal:5432/other")
    assert a.task_queue == b.task_queue != other.task_queue
    assert "secret" not in a.ledger_label and a.ledger_label == "postgresql://db.internal:5432/ledger"
    assert Settings(home=tmp_path / "a").task_queue != Settings(home=tmp_path / "b").task_queue  # SQLite: per home


def test_a_shared_ledger_names_its_queue_after_its_own_id(tmp_path, pg_url, pg_server):
    """Two spellings of one database give one queue; another database (even one that looks alike)
    gives another, since the queue comes from the id the ledger's first migration wrote."""
    from checkpoint_tui.ledger.store import with_shared_queue
    from checkpoint_tui.settings import postgres_parts

    parts = postgres_parts(pg_url)
    respelled = f"postgresql:///{parts['dbname']}?host={parts['host']}&port={parts['port']}&user={parts['user']}"
    a = with_shared_queue(Settings(home=tmp_path / "a", ledger_url=pg_url))
    b = with_shared_queue(Settings(home=tmp_path / "b", ledger_url=respelled))
    other = with_shared_queue(Settings(home=tmp_path / "c", ledger_url=pg_server.new_database()))
    assert a.task_queue == b.task_queue != other.task_queue
    assert a.task_queue.startswith("checkpoint-pg-")
    given = with_shared_queue(Settings(home=tmp_path / "d", ledger_url=pg_url, task_queue_name="mine"))
    assert given.task_queue == "mine"
    assert with_shared_queue(Settings(home=tmp_path / "e")).task_queue.startswith("checkpoint-")  # SQLite: per home
