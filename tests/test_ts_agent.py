"""The AI SDK agent on Temporal's TypeScript SDK (examples/ts/: the Vercel AI SDK through
@temporalio/ai-sdk, its model a scripted OpenAI-compatible server the worker starts on loopback;
installed and built by `make test`). The lab knows the plugin by its framework module (frameworks/ai_sdk.py),
with no declaration: `invokeModel` is the model, the tools' activities are `sendEmail` (blind: shown
duplicating at the seeded after-effect crash point, named with its call id) and `sendEmailGuarded`
(exactly-once by its own means, keyed by the AI SDK's toolCallId: passes, its email once)."""

from __future__ import annotations

import shutil
from collections import Counter
from itertools import count
from pathlib import Path

import pytest

from test_ts_worker import outbox, ts_chaos

AGENT = Path(__file__).resolve().parent.parent / "examples" / "ts"
_homes = count()
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (AGENT / "lib" / "worker.js").is_file(),
    reason="node, or examples/ts built (`make test` installs it with npm and compiles it with tsc), not here",
)


def _chaos(home: Path, workflow: str, address: str, worker: str | None = None) -> tuple:
    return ts_chaos(
        AGENT, "lib/worker.js", home, workflow, worker, address=address
    )  # no declaration: it knows the plugin


def test_the_blind_ai_sdk_tool_is_shown_duplicating_at_its_outbox(session_root, temporal_address):
    home = session_root / f"ts-agent-blind-{next(_homes)}"
    out, report = _chaos(home, "TsAgentMailer", temporal_address)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-2000:]
    audit, emails = report["audit"], outbox(home)
    assert audit["duplicated"] == sum(n - 1 for n in emails.values()) >= 1, emails
    dups = audit["destination_duplicates"]
    assert dups and all(len(d["calls"]) == 1 and d["calls"][0].startswith("sendEmail call call_") for d in dups)
    assert any(
        k["kind"] == "worker-after-effect" and k["label"].startswith("tool · sendEmail · call ")
        for k in report["kills"]
    )
    assert audit["framework"] == "ai-sdk" and audit["tool_calls"] == 5 and audit["model_requests"] == 6
    again = audit["re_executed"]
    assert again and all(c["tool"] == "sendEmail" and c["call_id"].startswith("call_") for c in again)


def test_the_ai_sdk_tool_keyed_by_its_tool_call_id_passes_under_npm_run(session_root, temporal_address):
    home = session_root / f"ts-agent-guarded-{next(_homes)}"
    out, report = _chaos(home, "TsAgentMailerGuarded", temporal_address, "npm run worker")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    audit = report["audit"]
    assert Counter(outbox(home).values()) == Counter({1: 5}) and audit["effects"] == 0  # no library
    assert len(audit["effect_once"]) >= 1 and audit["at_risk"] == [] and audit["lost_work_count"] == 0
    assert audit["framework"] == "ai-sdk" and all(c["call_id"].startswith("call_") for c in audit["effect_once"])
    eml = sorted(p.name for p in (home / "example-out").iterdir())
    assert len(eml) == 5 and all(n.startswith(f"{report['run_id']}@call_") and n.endswith(".eml") for n in eml)
