"""The offline deterministic provider: the decision and token counts depend only on run id + step,
so retries and replays write byte-identical effects."""

from __future__ import annotations

import hashlib
import json

from checkpoint_tui.model.decision import Decision

PROVIDER = "offline"


def _digest(run_id: str, step: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{run_id}:{step}".encode()).digest()[:8], "big")


def offline_decision(run_id: str, step: int, total: int, previous_note: str | None) -> tuple[Decision, int, str]:
    """Returns (decision, tokens, raw JSON text)."""
    h = _digest(run_id, step)
    if h % 3 == 0:
        text = f"step {step}/{total} checkpoint reached"
        decision = Decision("note", {"text": text}, "record progress for the operator")
    else:
        a, b, c = 2 + h % 11, 3 + (h >> 8) % 13, (h >> 16) % 50
        decision = Decision("compute", {"expression": f"{a}*{b}+{c}"}, "compute the next figure")
    raw = json.dumps({"action": decision.action, "args": decision.args, "thought": decision.thought})
    prompt_tokens = 60 + len(previous_note or "") // 4
    tokens = prompt_tokens + len(raw) // 4
    return decision, tokens, raw
