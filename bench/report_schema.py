"""What the typed chaos report costs to write and to read, per typing library: a realistic report of
`chaos --runs 1000` on a user's workflow (each run's activity audit with its re-executed calls and
lost work, its seven checks, every worker death placed in every run), encoded to JSON bytes and
decoded from them into the typed form (parse + validate), for:

- json: bare dicts, json.dumps / json.loads, no types and no checks (what the report was before #49);
- dataclasses: the schema as it is (proof/report/: stdlib dataclasses and its own reader), the choice;
- pydantic 2: a TypeAdapter over the same dataclasses (installed with the agents extra, not a core
  dependency; it reads the fields as declared, so the `rest` keys, the flat figures and `class` are
  not where the report has them: a little less work than the real reader does);
- msgspec 0.22: Structs mirroring the report's shape (not installed by the project: `pip install
  msgspec==0.22.0` to measure; its unions of two record types must be tagged, which the report's
  JSON is not, so the mirror has the activity audit only, and unknown keys are dropped).

    .venv/bin/python bench/report_schema.py [--runs 1000] [--repeats 7]

Prints the median ms of --repeats encodes and decodes, the peak memory of one of each (tracemalloc)
and each candidate's ratio to bare json; writes run/bench/report_schema.json."""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import write_result  # noqa: E402
from checkpoint_tui.proof.chaos.run_totals import totals  # noqa: E402
from checkpoint_tui.proof.report import Check  # noqa: E402
from checkpoint_tui.proof.report.audit import ActivityAuditRecord, Call, Latency, LostUnit, LostWork  # noqa: E402
from checkpoint_tui.proof.report.chaos import (  # noqa: E402
    ActivityFigures,
    ChaosReport,
    CommandEvents,
    Fired,
    FleetFigures,
    Placement,
    RunRecord,
    read_chaos,
)
from checkpoint_tui.proof.report.codec import encode  # noqa: E402

CHECKS = (
    "chaos: workflow COMPLETED",
    "chaos: no lost effect",
    "chaos: no duplicated effect",
    "chaos: no re-executed tool call or activity at risk",
    "chaos: every activity's arguments decoded",
    "chaos: model requests re-run (reported apart)",
    "chaos: no lost work (a task that sat out its timeout, a failed workflow, a workflow task failing)",
)
DEATHS = 4  # worker deaths of the schedule, each placed against every run's history


def _call(rng: random.Random, run: str, seq: int, cls: str) -> Call:
    tool = "send_email" if cls == "tool" else None
    return Call(
        seq=seq,
        activity_id=str(seq),
        type="send_email" if cls == "tool" else "request_model",
        attempt=2,
        identity=f"{rng.randrange(1000, 99999)}@host",
        status="completed",
        segment=0,
        execution=f"exec-{run}",
        duration_s=rng.uniform(0.01, 2.0),
        last_failure="activity StartToClose timeout" if rng.random() < 0.3 else None,
        resumed=True,
        cls=cls,
        label=f"{cls} · {tool or 'gpt'}",
        summary=None,
        tool=tool,
        call_id=f"call_{rng.getrandbits(48):x}" if tool else None,
        args_digest=f"{rng.getrandbits(64):016x}",
        tokens=rng.randrange(100, 2000) if cls == "model" else None,
        heartbeat_timeout_s=None,
        start_to_close_s=30.0,
        guarded=cls == "tool",
        effects=[f"act:{run}:exec:{seq}:email (email) applied,skipped · 1 physical write(s)"] if tool else [],
    )


def _audit(rng: random.Random, run: str) -> ActivityAuditRecord:
    tool, model = _call(rng, run, 4, "tool"), _call(rng, run, 3, "model")
    keys = [f"act:{run}:exec:{i}:email" for i in range(1, 11)]
    timeout = LostUnit(lost=False, line=f"send_email #4 waited out its START_TO_CLOSE timeout in {run}")
    timeout.more = {"seq": 4, "activity_type": "send_email", "attempt": 1, "kind": "START_TO_CLOSE", "waited_s": 2.0}
    return ActivityAuditRecord(
        run_id=run,
        workflow_type="PydanticMailerGuarded",
        workflow_status="COMPLETED",
        activities=12,
        completed=12,
        framework="pydantic-ai",
        re_executed=[model, tool],
        guarded_re_executed=[tool],
        model_reruns=[model],
        tokens_paid_again=model.tokens or 0,
        tool_calls=5,
        model_requests=7,
        effects=10,
        outcomes={"applied": 10, "skipped": 1},
        probe_available=True,
        probe_writes=dict.fromkeys(keys, 1),
        lost_work=LostWork(
            timeouts=[timeout],
            timeouts_total=1,
            schedule_to_start={"activity": Latency(samples=12, p50_s=0.004, p99_s=0.03, max_s=0.03), "workflow": None},
        ),
        ok=True,
        verdict="run completed — 12 of 12 activities, re-executed 2 (guarded 1, model 1) · nothing at risk",
    )


def make_report(runs: int, seed: int = 1) -> ChaosReport:
    """What `chaos --runs N` writes for a user's workflow, with made-up but realistic values."""
    rng = random.Random(seed)
    run_ids = [f"run-20260101-000000-{i:04x}" for i in range(runs)]
    audits = [_audit(rng, r) for r in run_ids]
    kills = [
        Fired("worker-in-activity", 2 + i, 4000 + i, 1.7e9 + i, {"label": "tool · send_email", "into_s": 0.2})
        for i in range(DEATHS)
    ]
    records = [
        RunRecord(
            run_id=r, audit=a, checks=[Check(name, True, "workflow COMPLETED · activities 12/12") for name in CHECKS]
        )
        for r, a in zip(run_ids, audits, strict=True)
    ]
    return ChaosReport(
        seed=seed,
        workload="workflow",
        unit="activity",
        steps=8,
        run_id=run_ids[0],
        schedule=[{"at_step": k.step, "nemesis": k.kind, "target": "worker", "delay_ms": 40} for k in kills],
        run_started_at=1.7e9,
        audit=audits[0],
        kills=kills,
        median_restart_s=0.8,
        wall_s=600.0,
        windows={"tool call": DEATHS * runs},
        kill_windows=[Placement(r, "kill", k.pid, k.at, k.step, "tool call") for r in run_ids for k in kills],
        figures=ActivityFigures(workflow="PydanticMailerGuarded", aim="tool", framework="pydantic-ai"),
        fleet=FleetFigures(commands=[CommandEvents(queue="q", command="python worker.py", events={"spawn": 5})]),
        checks=[Check(f"{c.name} ({r.run_id})", c.ok, c.observed) for r in records for c in r.checks],
        runs=records,
        totals=totals(list(audits)),
    )


try:
    import msgspec
except ImportError:
    msgspec = None

if msgspec is not None:  # the report's shape as msgspec Structs (the docstring says what they leave out)

    class MCheck(msgspec.Struct):
        name: str
        ok: bool
        observed: str
        numbers: dict[str, float | int | str | None] = msgspec.field(default_factory=dict)
        latency: bool = False
        met: bool = True

    class MCall(msgspec.Struct):
        seq: int | None = None
        activity_id: str | None = None
        type: str | None = None
        attempt: int | None = None
        identity: str | None = None
        status: str | None = None
        segment: int | None = None
        execution: str | None = None
        duration_s: float | None = None
        last_failure: str | None = None
        resumed: bool | None = None
        cls: str | None = msgspec.field(default=None, name="class")
        label: str | None = None
        summary: str | None = None
        tool: str | None = None
        call_id: str | None = None
        args_digest: str | None = None
        tokens: int | None = None
        heartbeat_timeout_s: float | None = None
        start_to_close_s: float | None = None
        guarded: bool | None = None
        effects: list[str] = msgspec.field(default_factory=list)

    class MLostUnit(msgspec.Struct):
        lost: bool = False
        line: str = ""

    class MLatency(msgspec.Struct):
        samples: int = 0
        p50_s: float | None = None
        p99_s: float | None = None
        max_s: float | None = None

    class MLostWork(msgspec.Struct):
        lost: int = 0
        first: str | None = None
        units: list[str] = msgspec.field(default_factory=list)
        timeouts: list[MLostUnit] = msgspec.field(default_factory=list)
        timeouts_total: int = 0
        task_failures: list[MLostUnit] = msgspec.field(default_factory=list)
        task_failures_total: int = 0
        outcome: MLostUnit | None = None
        schedule_to_start: dict[str, MLatency | None] = msgspec.field(default_factory=dict)

    class MAudit(msgspec.Struct):
        run_id: str | None = None
        workflow_type: str | None = None
        workflow_status: str | None = None
        activities: int = 0
        completed: int = 0
        framework: str | None = None
        strict_models: bool = False
        re_executed: list[MCall] = msgspec.field(default_factory=list)
        at_risk: list[MCall] = msgspec.field(default_factory=list)
        guarded_re_executed: list[MCall] = msgspec.field(default_factory=list)
        model_reruns: list[MCall] = msgspec.field(default_factory=list)
        tokens_paid_again: int = 0
        never_ran: list[MCall] = msgspec.field(default_factory=list)
        tool_calls: int = 0
        model_requests: int = 0
        effects: int = 0
        outcomes: dict[str, int] = msgspec.field(default_factory=dict)
        unstamped: list[str] = msgspec.field(default_factory=list)
        recovered: list[str] = msgspec.field(default_factory=list)
        re_entered: list[str] = msgspec.field(default_factory=list)
        duplicate_ids: int = 0
        probe_available: bool = False
        probe_writes: dict[str, int] = msgspec.field(default_factory=dict)
        lost: int = 0
        duplicated: int = 0
        lost_detail: list[str] = msgspec.field(default_factory=list)
        duplicated_detail: list[str] = msgspec.field(default_factory=list)
        lost_work: MLostWork | None = None
        lost_work_count: int = 0
        destinations: list[dict[str, object]] = msgspec.field(default_factory=list)
        effect_once: list[MCall] = msgspec.field(default_factory=list)
        destination_duplicates: list[dict[str, object]] = msgspec.field(default_factory=list)
        ok: bool | None = None
        verdict: str | None = None

    class MFired(msgspec.Struct):
        kind: str
        step: int | None
        pid: int | None
        at: float
        restart_s: float | None = None
        stalled_s: float | None = None
        recovery_s: float | None = None
        landed: str | None = None
        retry_s: float | None = None

    class MPlacement(msgspec.Struct):
        run_id: str
        event: str
        pid: int | None
        at: float
        step: int | None
        window: str

    class MRun(msgspec.Struct):
        run_id: str | None = None
        audit: MAudit | None = None
        checks: list[MCheck] = msgspec.field(default_factory=list)

    class MReport(msgspec.Struct):
        schema: int = 1
        seed: int | None = None
        workload: str | None = None
        unit: str = "step"
        steps: int = 0
        run_id: str | None = None
        schedule: list[dict[str, object]] = msgspec.field(default_factory=list)
        run_started_at: float = 0.0
        audit: MAudit | None = None
        kills: list[MFired] = msgspec.field(default_factory=list)
        pauses: list[MFired] = msgspec.field(default_factory=list)
        resets: list[MFired] = msgspec.field(default_factory=list)
        not_fired: list[dict[str, object]] = msgspec.field(default_factory=list)
        median_restart_s: float | None = None
        wall_s: float = 0.0
        windows: dict[str, int] = msgspec.field(default_factory=dict)
        kill_windows: list[MPlacement] = msgspec.field(default_factory=list)
        workflow: str | None = None
        aim: str | None = None
        framework: str | None = None
        fleet: dict[str, object] | None = None
        checks: list[MCheck] = msgspec.field(default_factory=list)
        runs: list[MRun] | None = None
        totals: dict[str, int] | None = None


Codec = tuple[Callable[[], bytes], Callable[[bytes], object]]


def candidates(report: ChaosReport) -> dict[str, Codec]:
    doc = encode(report)
    found: dict[str, Codec] = {
        "json (dicts, no types)": (lambda: json.dumps(doc).encode(), json.loads),
        "dataclasses + own reader": (lambda: json.dumps(encode(report)).encode(), lambda b: read_chaos(json.loads(b))),
    }
    try:
        from pydantic import TypeAdapter

        adapter = TypeAdapter(ChaosReport)
        found["pydantic 2 TypeAdapter"] = (lambda: adapter.dump_json(report), adapter.validate_json)
    except ImportError:
        print("pydantic: not installed (the agents extra has it)")
    if msgspec is None:
        print("msgspec: not installed (.venv/bin/pip install msgspec==0.22.0 to measure it)")
    else:
        typed = msgspec.convert(doc, MReport)
        found["msgspec 0.22 Structs"] = (lambda: msgspec.json.encode(typed), msgspec.json.Decoder(MReport).decode)
    return found


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def peak_mb(fn: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        kept = fn()  # held until the peak is read: the typed report is what a reader keeps
        peak = tracemalloc.get_traced_memory()[1]
        del kept
    finally:
        tracemalloc.stop()
    return peak / 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    report = make_report(args.runs)
    data = json.dumps(encode(report)).encode()
    assert read_chaos(json.loads(data)) == report  # the chosen reader reads back what was written
    print(f"a chaos report of {args.runs} runs: {len(data) / 1e6:.1f} MB of JSON")
    result: dict[str, dict[str, float]] = {}
    for name, (enc, dec) in candidates(report).items():
        wire = enc()
        result[name] = {
            "encode_ms": median_ms(enc, args.repeats),
            "decode_ms": median_ms(lambda dec=dec, wire=wire: dec(wire), args.repeats),
            "encode_peak_mb": peak_mb(enc),
            "decode_peak_mb": peak_mb(lambda dec=dec, wire=wire: dec(wire)),
        }
    base = result["json (dicts, no types)"]
    heads = ("encode ms", "decode ms", "enc peak MB", "dec peak MB", "×json enc", "×json dec")
    print(f"{'candidate':<26}" + "".join(f" {h:>12}" for h in heads))
    for name, r in result.items():
        ratios = (r["encode_ms"] / base["encode_ms"], r["decode_ms"] / base["decode_ms"])
        figures = [f"{r[k]:.1f}" for k in ("encode_ms", "decode_ms", "encode_peak_mb", "decode_peak_mb")]
        print(f"{name:<26}" + "".join(f" {v:>12}" for v in [*figures, *(f"{x:.2f}" for x in ratios)]))
    out = {"args": vars(args), "report_bytes": len(data), "candidates": result}
    print(f"wrote {write_result('report_schema', out)}")


if __name__ == "__main__":
    main()
