"""A team's data converter (--data-converter MODULE:ATTR), run in a process of its own: the lab never
imports a team's code. `python -m checkpoint_tui.ops.converter_proc MODULE:ATTR`, from the workers'
directory, with their environment (a codec's key is read where the workers read it).

It translates between the lab's plain JSON payloads and the team's: one JSON request a line on stdin,
one answer a line on stdout, until stdin closes (the lab died or is done: it exits with it).

    {"id": N, "op": "encode", "payloads": [BASE64 of a json/plain Payload, ...]}
    {"id": N, "op": "decode", "payloads": [BASE64 of the team's Payload, ...]}
    -> {"id": N, "payloads": [BASE64 or null, ...], "errors": [null or "one line", ...]}

Encode: the value the JSON stands for, through the team's converter (its payload converter, then its
codec). Decode: the team's codec and payload converter, the value back as JSON; a payload either step
cannot read is an error of its own, never a guess. ATTR is a `temporalio.converter.DataConverter`, or a
callable that returns one.
"""

from __future__ import annotations

import asyncio
import base64
import importlib
import json
import os
import sys
from typing import TextIO

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

MAX_LINE = 64 * 1024 * 1024  # the lab sends at most 16 MiB of payloads a request (base64: ~21 MiB)
MAX_ERROR = 200


def load(spec: str) -> DataConverter:
    """MODULE:ATTR as a DataConverter (the attribute, or what calling it returns)."""
    module_name, _, attr = spec.partition(":")
    target: object = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not isinstance(target, DataConverter) and callable(target):
        target = target()
    if not isinstance(target, DataConverter):
        raise TypeError(f"{spec} is a {type(target).__name__}, not a temporalio.converter.DataConverter")
    return target


def _payload(text: str) -> Payload:
    payload = Payload()
    payload.ParseFromString(base64.b64decode(text, validate=True))
    return payload


def _text(payload: Payload) -> str:
    return base64.b64encode(payload.SerializeToString()).decode()


def _line(err: BaseException) -> str:
    said = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {said}"[:MAX_ERROR]


async def translate(team: DataConverter, op: str, payload: Payload) -> Payload:
    """One payload, JSON to the team's form (encode) or back (decode)."""
    plain = DataConverter.default
    if op == "encode":
        [value] = plain.payload_converter.from_payloads([payload])
        return (await team.encode([value]))[0]
    [value] = await team.decode([payload])
    return plain.payload_converter.to_payloads([value])[0]


async def answer(team: DataConverter, request: dict) -> dict:
    op, texts = request.get("op"), request.get("payloads")
    if op not in ("encode", "decode") or not isinstance(texts, list):
        return {"id": request.get("id"), "error": "a request is {id, op: encode|decode, payloads: [...]}"}
    out: list[str | None] = []
    errors: list[str | None] = []
    for text in texts:
        try:
            out.append(_text(await translate(team, op, _payload(str(text)))))
            errors.append(None)
        except Exception as err:  # the team's code: any failure is this payload's, said in one line
            out.append(None)
            errors.append(_line(err))
    return {"id": request.get("id"), "payloads": out, "errors": errors}  # its id: the lab matches it


async def serve(team: DataConverter, out: TextIO) -> None:
    reader = asyncio.StreamReader(limit=MAX_LINE)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        try:
            line = await reader.readline()
        except (ValueError, asyncio.LimitOverrunError):  # a line past MAX_LINE: the stream is lost, and so is this
            return
        if not line:
            return
        try:
            request = json.loads(line)
            reply = await answer(team, request) if isinstance(request, dict) else {"error": "not a JSON object"}
        except ValueError as err:
            reply = {"error": _line(err)}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m checkpoint_tui.ops.converter_proc MODULE:ATTR")
    # The answers go to the stdout the lab reads; whatever the team's code prints goes to stderr instead
    # (a print at import would otherwise be read as an answer).
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        team = load(sys.argv[1])
    except Exception as err:  # said as the first answer: the lab reads it as the start's outcome
        out.write(json.dumps({"ready": False, "error": _line(err)}) + "\n")
        out.flush()
        raise SystemExit(1) from None
    classes = [  # the payload converter's class as the team named it (the SDK wraps the instance)
        team.payload_converter_class.__name__,
        type(team.payload_codec).__name__ if team.payload_codec else "no codec",
    ]
    out.write(json.dumps({"ready": True, "converter": ", ".join(classes)}) + "\n")
    out.flush()
    asyncio.run(serve(team, out))
    # stdin closed (the lab is done, or died): gone at once, whatever threads the team's import started
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
