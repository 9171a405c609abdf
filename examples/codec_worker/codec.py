"""The team's data converter: a payload converter of its own (JSON in a `json/team` envelope, which
Temporal's default converter does not read) and an encrypting codec (AES-GCM, every payload). Both the
worker and the lab (`--data-converter codec:DATA_CONVERTER`, in a process of its own) use this module.

The key is 32 random bytes in `$CHECKPOINT_HOME/codec-example.key` (0600), made by whichever process
needs it first: an example's key, never one in the repository or on a command line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    BinaryNullPayloadConverter,
    CompositePayloadConverter,
    DataConverter,
    EncodingPayloadConverter,
    PayloadCodec,
)

ENCRYPTED = b"binary/encrypted"


class TeamJSON(EncodingPayloadConverter):
    """JSON inside {"team": 1, "value": ...}, under an encoding of its own."""

    @property
    def encoding(self) -> str:
        return "json/team"

    def to_payload(self, value: Any) -> Payload | None:
        data = json.dumps({"team": 1, "value": value}, separators=(",", ":"), sort_keys=True).encode()
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data)

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        doc = json.loads(payload.data)
        if not isinstance(doc, dict) or doc.get("team") != 1:
            raise ValueError("not a json/team envelope")
        return doc["value"]


class TeamPayloadConverter(CompositePayloadConverter):
    def __init__(self) -> None:
        super().__init__(BinaryNullPayloadConverter(), TeamJSON())


def _key() -> bytes:
    """The key file's 32 bytes; made whole under another name and linked in place, so a reader racing
    the maker sees no key or the whole key, never an empty file."""
    path = Path(os.environ.get("CHECKPOINT_HOME") or ".").expanduser() / "codec-example.key"
    if not path.exists():
        tmp = path.with_name(f".codec-example.key.{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(32))
        try:
            os.link(tmp, path)  # only if absent: the first maker's key wins
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = path.read_bytes()
    if len(key) != 32:
        raise ValueError(f"{path.name}: not a 32-byte key")
    return key


class EncryptionCodec(PayloadCodec):
    """Every payload AES-GCM-encrypted (a 12-byte nonce, then the sealed Payload)."""

    def __init__(self) -> None:
        self._aead: AESGCM | None = None

    @property
    def aead(self) -> AESGCM:
        if self._aead is None:
            self._aead = AESGCM(_key())
        return self._aead

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            nonce = os.urandom(12)
            sealed = nonce + self.aead.encrypt(nonce, p.SerializeToString(), None)
            out.append(Payload(metadata={"encoding": ENCRYPTED}, data=sealed))
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for p in payloads:
            if p.metadata.get("encoding") != ENCRYPTED:
                out.append(p)  # not ours (a server's own payload): as it is
                continue
            inner = Payload()
            inner.ParseFromString(self.aead.decrypt(p.data[:12], p.data[12:], None))
            out.append(inner)
        return out


DATA_CONVERTER = DataConverter(payload_converter_class=TeamPayloadConverter, payload_codec=EncryptionCodec())
# The same codec under Temporal's default (JSON) payload converter: what a codec server (codec_server.py)
# serves, and the worker runs with CODEC_EXAMPLE_CONVERTER=json.
CODEC_ONLY = DataConverter(payload_codec=EncryptionCodec())


def converter() -> DataConverter:
    """The worker's: DATA_CONVERTER, or CODEC_ONLY with CODEC_EXAMPLE_CONVERTER=json."""
    return CODEC_ONLY if os.environ.get("CODEC_EXAMPLE_CONVERTER") == "json" else DATA_CONVERTER
