"""What Temporal's default converter spends decoding the workflow's payload dataclasses, with their
annotations as the modules define them (objects) and as strings (what `from __future__ import
annotations` would make them): the converter calls typing.get_type_hints on every decode.

    .venv/bin/python bench/payload_decode.py [--decodes 2000] [--repeats 5]

Prints µs of CPU per decode (median of --repeats) for each payload type, both ways."""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

from temporalio.converter import DataConverter

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_result  # noqa: E402
from checkpoint_tui.loop_worker.shared import EffectInput, LlmInput, LlmOutput, ModelRef, StepInput  # noqa: E402
from checkpoint_tui.model.decision import Decision  # noqa: E402

RUN = "run-20260101-000000-beef"


def samples() -> list[object]:
    decision = Decision(action="compute", args={"expression": "2+2"}, thought="x" * 80)
    return [
        LlmInput(RUN, 3, 10, 1.0, "previous note", ModelRef(None, None)),
        LlmOutput(decision=decision, provider="offline", tokens=5, cost_usd=0.0),
        EffectInput(RUN, RUN, 3, 10, decision, "4"),
        StepInput(RUN, 3, 10),
    ]


def with_string_annotations(cls: type) -> type:
    """The same dataclass with every annotation as a string, nested payload types included."""
    namespace = {**vars(sys.modules[cls.__module__]), "Decision": Decision, "ModelRef": ModelRef}
    spec = []
    for f in dataclasses.fields(cls):
        default = () if f.default is dataclasses.MISSING else (dataclasses.field(default=f.default),)
        spec.append((f.name, _spelled(f.type), *default))
    made = dataclasses.make_dataclass(cls.__name__, spec)
    made.__module__ = "payload_decode_strings"
    sys.modules.setdefault("payload_decode_strings", type(sys)("payload_decode_strings")).__dict__.update(namespace)
    return made


def _spelled(hint: object) -> str:
    return hint if isinstance(hint, str) else getattr(hint, "__name__", None) or repr(hint).replace("typing.", "")


def per_decode_us(converter, obj: object, cls: type, decodes: int) -> float:
    payloads = converter.to_payloads([obj])
    started = time.process_time()
    for _ in range(decodes):
        converter.from_payloads(payloads, [cls])
    return (time.process_time() - started) * 1e6 / decodes


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--decodes", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    converter = DataConverter.default.payload_converter
    result: dict[str, dict[str, float]] = {}
    print(f"{'payload':<12} {'objects µs':>11} {'strings µs':>11}")
    for obj in samples():
        cls = type(obj)
        stringly = with_string_annotations(cls)
        as_objects = [per_decode_us(converter, obj, cls, args.decodes) for _ in range(args.repeats)]
        as_strings = [per_decode_us(converter, obj, stringly, args.decodes) for _ in range(args.repeats)]
        objects, strings = statistics.median(as_objects), statistics.median(as_strings)
        result[cls.__name__] = {"objects_us": objects, "strings_us": strings}
        print(f"{cls.__name__:<12} {objects:>11.0f} {strings:>11.0f}")
    print(f"wrote {write_result('payload_decode', {'args': vars(args), 'us_per_decode': result})}")


if __name__ == "__main__":
    main()
