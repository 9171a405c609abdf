"""Any other agent framework, or a hand-rolled agent, in one declaration: which activity types are its
model requests and which its tool calls (shell-style globs over the activity type, from
`--model-activities` / `--tool-activities` or a `[tool.checkpoint-tui]` table of the worker project's
pyproject.toml). A tool is named by its activity type; its call id is not known (history holds no
convention for it), its arguments are digested. Anything else stays "other": re-executed without a
claim, it is at risk, and the audit says how to declare it."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from checkpoint_tui.frameworks.units import (
    ActivitySeen,
    UnitInfo,
    args_of,
    clean,
    digest,
    field,
    other,
    summary_of,
    tokens_of,
    type_of,
)

NAME = "declared"
MAX_GLOBS = 32  # per kind: a declaration is a handful of patterns, not a list of every type
MAX_GLOB_CHARS = 200


@dataclass(frozen=True)
class Declared:
    model: tuple[str, ...] = ()  # globs over activity types: model requests
    tool: tuple[str, ...] = ()  # globs over activity types: tool calls

    def __bool__(self) -> bool:
        return bool(self.model or self.tool)

    def classify(self, seen: list[ActivitySeen]) -> list[UnitInfo]:
        return [self._one(s) for s in seen]

    def _one(self, seen: ActivitySeen) -> UnitInfo:
        kind = type_of(seen)
        name = clean(kind)
        if any(fnmatchcase(kind, g) for g in self.model):
            usage = field(getattr(seen, "result", None), "usage")
            return UnitInfo("model", name, None, None, summary_of(seen), tokens_of(usage), f"model · {name or '?'}")
        if any(fnmatchcase(kind, g) for g in self.tool):
            return UnitInfo("tool", name, None, digest(args_of(seen)), summary_of(seen), None, f"tool · {name or '?'}")
        return other(seen)


def check_glob(text: str) -> str:
    """A glob as a flag or a config file gives it: one printable line, bounded (ValueError otherwise)."""
    if not isinstance(text, str) or not text or len(text) > MAX_GLOB_CHARS or not text.isprintable():
        raise ValueError(f"an activity-type glob is one printable line of 1 to {MAX_GLOB_CHARS} characters")
    return text
