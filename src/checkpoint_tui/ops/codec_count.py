"""What a team's codec (ops/remote_codec.py, ops/codec_client.py) did not make readable, counted: a
payload it refused, one it returned in an encoding the audit cannot read (a server that passed it
through, a payload converter of the team's behind a codec server), one too big to send, and those a
bound left out (core/history_codec.py). Each is kept as it was, marked `binary/undecodable` with why,
and counted: the check `every payload read through the team's converter` fails on any (a false PASS
would be an audit blind to what it did not read)."""

from __future__ import annotations

from collections.abc import Sequence

from temporalio.api.common.v1 import Payload

UNDECODABLE = b"binary/undecodable"  # a payload the team's converter could not read (its error in `error`)
# What Temporal's default payload converter reads: the audit's JSON, and what it knows as not JSON
READABLE = frozenset({b"json/plain", b"binary/null", b"binary/plain", b"json/protobuf", b"binary/protobuf"})
ERROR_CHARS = 200


class Counted:
    """The count and the first reason, shared by the lab's two team codecs."""

    def __init__(self) -> None:
        self.undecodable = 0
        self.first_error: str | None = None

    def not_read(self, n: int, why: str) -> None:
        self.undecodable += n
        self.first_error = self.first_error or why[:ERROR_CHARS]

    def checked(self, sent: Sequence[Payload], back: Sequence[Payload | None], errors: Sequence[str | None]) -> list:
        """Each decoded payload, or the one sent marked with why it was not read (and counted)."""
        out = []
        for payload, plain, error in zip(sent, back, errors, strict=True):
            encoding = plain.metadata.get("encoding", b"") if plain is not None else b""
            if error is None and plain is not None and encoding not in READABLE:
                error = f"still {encoding[:40].decode(errors='replace')!r} after decoding: not a form the lab reads"
            if error is not None or plain is None:
                self.not_read(1, error or "no answer")
                out.append(mark_undecodable(payload, error or "no answer"))
            else:
                out.append(plain)
        return out


def mark_undecodable(payload: Payload, error: str) -> Payload:
    """The payload as it was, marked as one the team's converter did not make readable, with why."""
    marked = Payload()
    marked.CopyFrom(payload)
    marked.metadata["encoding"] = UNDECODABLE
    marked.metadata["error"] = error.encode()[:ERROR_CHARS]
    return marked
