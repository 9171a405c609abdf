"""A staging cluster's front for the tests (#54): Debian's nginx on a free loopback port, TLS with a
server certificate for `temporal.staging.test`, a client certificate required (signed by the test CA)
and an API key checked (`authorization: Bearer KEY`), proxying gRPC to a dev server. Started and stopped
by the tests; the certificates are made here (cryptography), valid for a day."""

from __future__ import annotations

import datetime
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = Path(__file__).resolve().parent.parent
SERVER_NAME = "temporal.staging.test"
KEY = "sk-staging-test-key"  # the front's; a test's own, never a real one


def nginx_binary() -> str | None:
    """nginx on PATH, else the one `make test` extracts from Debian's package into .venv/nginx."""
    local = ROOT / ".venv" / "nginx" / "usr" / "sbin" / "nginx"
    return shutil.which("nginx") or (str(local) if local.is_file() else None)


def _pem(obj: object) -> bytes:
    if isinstance(obj, ec.EllipticCurvePrivateKey):
        return obj.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    assert isinstance(obj, x509.Certificate)
    return obj.public_bytes(serialization.Encoding.PEM)


def _cert(subject: str, issuer_key, issuer: x509.Name | None, key, usage: list | None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )
    if usage is None:  # a CA
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        if ExtendedKeyUsageOID.SERVER_AUTH in usage:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(folder: Path) -> None:
    """ca.pem, server.pem/.key, client.pem/.key signed by it; stranger.pem/.key signed by another CA."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("checkpoint-tui test CA", ca_key, None, ca_key, None)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other = _cert("another CA", other_key, None, other_key, None)
    files = {"ca.pem": _pem(ca)}
    for name, issuer_key, issuer, usage in (
        ("server", ca_key, ca.subject, [ExtendedKeyUsageOID.SERVER_AUTH]),
        ("client", ca_key, ca.subject, [ExtendedKeyUsageOID.CLIENT_AUTH]),
        ("stranger", other_key, other.subject, [ExtendedKeyUsageOID.CLIENT_AUTH]),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = SERVER_NAME if name == "server" else f"{name}.test"
        files[f"{name}.pem"] = _pem(_cert(subject, issuer_key, issuer, key, usage))
        files[f"{name}.key"] = _pem(key)
    for name, data in files.items():
        (folder / name).write_bytes(data)
        (folder / name).chmod(0o600)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
{user}
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/tmp/body;
  proxy_temp_path {dir}/tmp/proxy;
  fastcgi_temp_path {dir}/tmp/fcgi;
  uwsgi_temp_path {dir}/tmp/uwsgi;
  scgi_temp_path {dir}/tmp/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 600s;
  server {{
    listen 127.0.0.1:{port} ssl http2;
    ssl_certificate {dir}/server.pem;
    ssl_certificate_key {dir}/server.key;
    ssl_client_certificate {dir}/ca.pem;
    ssl_verify_client on;
    location / {{
      if ($http_authorization != "Bearer {key}") {{ return 401; }}
      grpc_pass grpc://{upstream};
      grpc_read_timeout 600s;
      grpc_send_timeout 600s;
    }}
  }}
}}
"""


@dataclass
class TlsFront:
    folder: Path
    upstream: str
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, binary: str) -> TlsFront:
        make_pki(self.folder)
        (self.folder / "tmp").mkdir(exist_ok=True)
        self.port = _free_port()
        user = "user root;" if os.geteuid() == 0 else ""  # as root, its worker would be nobody's: no reading the keys
        conf = CONF.format(dir=self.folder, user=user, port=self.port, key=KEY, upstream=self.upstream)
        (self.folder / "nginx.conf").write_text(conf)
        errors = str(self.folder / "error.log")
        with open(errors, "ab") as log:  # the child holds its own copy
            self.proc = subprocess.Popen(
                [binary, "-p", str(self.folder), "-c", str(self.folder / "nginx.conf"), "-e", errors],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited: {(self.folder / 'error.log').read_text()[-500:]}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not listen within 20 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # our own child: its master stops its worker
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def profile(self, path: Path, *, key: str = KEY, cert: str = "client", ca: str = "ca.pem") -> Path:
        """A TOML file with one profile, `staging`, for this front (its key, certificate and CA given)."""
        path.write_text(
            f'[profile.staging]\naddress = "{self.address}"\nnamespace = "default"\napi_key = "{key}"\n\n'
            f'[profile.staging.tls]\nserver_name = "{SERVER_NAME}"\nserver_ca_cert_path = "{self.folder / ca}"\n'
            f'client_cert_path = "{self.folder / (cert + ".pem")}"\n'
            f'client_key_path = "{self.folder / (cert + ".key")}"\n'
        )
        return path
