"""The prompt, the JSON schema and the GBNF grammar that constrain a model to one decision."""

from __future__ import annotations

SYSTEM = (
    "You are one step of a long-running agent. Reply with exactly one JSON object and nothing else, "
    'either {"action": "compute", "args": {"expression": "<arithmetic, e.g. 6*7>"}, "thought": "<under 15 words>"} '
    'or {"action": "note", "args": {"text": "<short note>"}, "thought": "<under 15 words>"}.'
)
CORRECTIVE = (
    "Your previous reply was rejected: it was not a valid JSON object of the required shape. "
    "Return only the JSON object, strings under 15 words, no prose, no code fences."
)


def user_prompt(step: int, total: int, previous_note: str | None) -> str:
    prev = previous_note or "(none: this is the first step)"
    return f"Step {step} of {total}. The previous step's note: {prev}. Decide this step."


DECISION_SCHEMA = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["compute", "note"]},
        "args": {
            "type": "object",
            "properties": {
                "expression": {"type": "string", "maxLength": 40},
                "text": {"type": "string", "maxLength": 120},
            },
        },
        "thought": {"type": "string", "maxLength": 120},
    },
    "required": ["action", "args", "thought"],
    "additionalProperties": False,
}

# Bounded GBNF for llama.cpp: short strings, one arg, single spaces. Tiny models stay valid with it.
GBNF = r"""
root ::= "{" ws "\"action\":" ws ( compute | note ) "}"
compute ::= "\"compute\"," ws "\"args\":" ws "{" ws "\"expression\":" ws expr ws "}," ws "\"thought\":" ws str ws
note ::= "\"note\"," ws "\"args\":" ws "{" ws "\"text\":" ws str ws "}," ws "\"thought\":" ws str ws
expr ::= "\"" [0-9] [0-9]? [0-9]? ( [+*-] [0-9] [0-9]? [0-9]? ){1,3} "\""
str ::= "\"" [a-zA-Z0-9,.:!?' -]{1,80} "\""
ws ::= " "?
"""
MAX_TOKENS = 160  # above the longest output the grammar allows
