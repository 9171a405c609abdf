"""The agent's activities: a scripted model (no network) and the guarded email tool."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio import activity

import checkpoint_tui.effects as effects


class MailActivities:
    def __init__(self, out: Path) -> None:
        self.outbox = out / "outbox.jsonl"

    @activity.defn(name="ask_model")
    async def ask_model(self, turn: int) -> dict:
        return {
            "tool": "send_email",
            "call_id": f"call-{turn}",
            "to": f"user{turn}@example.com",
            "body": f"turn {turn}",
        }

    @activity.defn(name="send_email")
    async def send_email(self, call: dict) -> str:
        line = json.dumps({"to": call["to"], "body": call["body"], "call_id": call["call_id"]}, sort_keys=True)

        def write(payload: str) -> None:
            self.outbox.parent.mkdir(parents=True, exist_ok=True)
            with open(self.outbox, "a") as fh:
                fh.write(payload + "\n")

        return await effects.exactly_once(kind="email", payload=line, write=write)
