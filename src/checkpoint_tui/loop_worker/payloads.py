"""Effect payloads, built only from activity arguments so every attempt writes identical bytes."""

from __future__ import annotations

from checkpoint_tui.loop_worker.shared import EffectInput


def outcome_text(inp: EffectInput) -> str:
    d = inp.decision
    if d.action == "compute":
        return f"{d.args['expression']} = {inp.tool_result}"
    return d.args["text"]


def file_payload(inp: EffectInput) -> str:
    d = inp.decision
    return (
        f"# Step {inp.step:03d} of {inp.total_steps}\n\n"
        f"- run: {inp.run_id}\n"
        f"- action: {d.action}\n"
        f"- thought: {d.thought}\n"
        f"- outcome: {outcome_text(inp)}\n"
    )


def note_payload(inp: EffectInput) -> str:
    return f"step {inp.step}: {outcome_text(inp)}"


def email_payload(inp: EffectInput) -> str:
    one_line = " ".join(outcome_text(inp).split())  # the outbox is one line per email
    return f"to=operator@example.invalid\tsubject=step {inp.step}/{inp.total_steps} done: {one_line}"


PAYLOAD_BUILDERS = {"file": file_payload, "db": note_payload, "email": email_payload}
