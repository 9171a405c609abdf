"""What the agent did about each model fault, the report's `answered_by` for a spell (model_lab.py), from
the proxy's record and the runs' histories, the first that holds:

- `Temporal retried the model request`: a model request's activity was retried across the fault (its
  first attempt scheduled before the fault stopped, its last started after the fault began), with no
  worker death of the lab's in between (that retry would be the death's), and the failure before its
  last attempt names no other fault (the proxy's own errors say which: `checkpoint-tui model-...`);
- `the agent asked again`: a request came after the fault stopped with no such retry (the model
  client's own retries, or the framework asking the model in a request of its own);
- `the run failed`: no request came after it, and a run's workflow FAILED;
- `not asked again`: no request came after it before chaos ended, and no run failed.

Several runs share one clock: with `--runs`, a request of another run counts as asked again."""

from __future__ import annotations

from collections.abc import Sequence

from checkpoint_tui.core.audit import Audit
from checkpoint_tui.proof.nemeses.model_proxy import MARKED

FAILED, TEMPORAL, AGENT, NONE = (
    "the run failed",
    "Temporal retried the model request",
    "the agent asked again",
    "not asked again",
)


def answered_by(spell: dict[str, object], audits: Sequence[Audit], deaths: Sequence[float] = ()) -> str:
    """`deaths`: when the lab's kills (and other worker deaths) happened, wall clock."""
    began, stopped, kind = spell.get("began"), spell.get("stopped"), str(spell.get("fault"))
    if isinstance(began, float | int) and isinstance(stopped, float | int):
        reruns = [r for a in audits for r in getattr(a, "model_reruns", [])]
        if any(_across(r, kind, float(began), float(stopped), deaths) for r in reruns):
            return TEMPORAL
    asked = spell.get("asked_after")
    if isinstance(asked, int) and asked >= 1:
        return AGENT
    return FAILED if any(a.workflow_status == "FAILED" for a in audits) else NONE


def _across(rerun: dict, kind: str, began: float, stopped: float, deaths: Sequence[float]) -> bool:
    scheduled, started = rerun.get("scheduled_at"), rerun.get("started_at")
    if not isinstance(scheduled, float | int) or not isinstance(started, float | int):
        return False
    named = MARKED.search(str(rerun.get("last_failure") or ""))
    if named is not None and named.group(1) != kind:  # the attempt before failed on another fault
        return False
    died = any(scheduled <= t <= started for t in deaths)
    return not died and scheduled <= stopped and started >= began


def annotate(models: dict[str, dict[str, object]] | None, audits: Sequence[Audit], deaths: Sequence[float]) -> None:
    """Each spell of the report's `fleet.models` with its `answered_by`."""
    for endpoint in (models or {}).values():
        spells = endpoint.get("spells")
        for spell in spells if isinstance(spells, list) else []:
            spell["answered_by"] = answered_by(spell, audits, deaths)
