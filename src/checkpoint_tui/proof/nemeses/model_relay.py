"""An answer on its way back through the model proxy (model_proxy.py): its tool calls garbled while
model-garbage is in force, the tokens the endpoint reports read, a stream rewritten line by line (an
event's `data:` line may come split over pieces), and a whole answer that a fault rewrites or cuts read
whole first, unless it is over MAX_BODY (then it passes as it comes, unchanged)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx

from checkpoint_tui.proof.nemeses.model_faults import (
    CUT,
    GARBAGE,
    Fault,
    garble_body,
    garble_event,
    usage_of_body,
    usage_of_event,
)

MAX_BODY = 8 << 20


class Relay:
    """An answer on its way back: its tool calls garbled (model-garbage), its usage read. A stream is
    rewritten line by line (an event's `data:` line may come split over pieces); a whole answer a
    fault rewrites (garbage) or cuts is read whole first, unless it is over MAX_BODY: then it passes
    as it comes, unchanged."""

    def __init__(self, fault: Fault | None, stream: bool) -> None:
        self.garble = fault is not None and fault.kind == GARBAGE
        self.stream = stream
        self.whole = not stream and fault is not None and fault.kind in (GARBAGE, CUT)
        self.usage: tuple[int, int] | None = None
        self.garbled = 0
        self._partial = b""
        self._body = bytearray()  # a whole answer's bytes, for its usage (up to MAX_BODY)
        self._done: set[str] = set()

    def rewrite(self, piece: bytes) -> bytes:
        if not self.stream:
            if len(self._body) <= MAX_BODY:
                self._body += piece
            if self.garble and self.whole:
                piece, self.garbled = garble_body(piece)
            return piece
        lines = (self._partial + piece).split(b"\n")
        self._partial = lines.pop()  # an unfinished line waits for the next piece
        if len(self._partial) > MAX_BODY:  # a line that never ends is passed on, unread
            lines.append(self._partial)
            self._partial = b""
        out = []
        for line in lines:
            if line.startswith(b"data:"):
                data = line[5:].strip()
                self.usage = usage_of_event(data, self.usage)
                if self.garble:
                    new, n = garble_event(data, self._done)
                    self.garbled += n
                    line = b"data: " + new if n else line
            out.append(line + b"\n")
        return b"".join(out)

    def flush(self) -> bytes:
        """The end of the answer: a whole one's usage read; a stream's last line, if it had no newline."""
        if not self.stream:
            if self.usage is None and len(self._body) <= MAX_BODY:
                self.usage = usage_of_body(bytes(self._body))
            return b""
        rest, self._partial = self._partial, b""
        return self.rewrite(rest + b"\n")[:-1] if rest else b""


async def pieces(resp: httpx.Response, relay: Relay) -> AsyncIterator[bytes]:
    """The answer's pieces as they come; one piece (the whole answer) where the relay rewrites or cuts
    it whole, unless it runs over MAX_BODY (then what was read, and the rest as it comes, unchanged)."""
    if not relay.whole:
        async for piece in resp.aiter_bytes():
            yield piece
        return
    body = bytearray()
    pieces = resp.aiter_bytes()
    async for piece in pieces:
        body += piece
        if len(body) > MAX_BODY:
            relay.whole = relay.garble = False
            yield bytes(body)
            async for more in pieces:
                yield more
            return
    yield bytes(body)
