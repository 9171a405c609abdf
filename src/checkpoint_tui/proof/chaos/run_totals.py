"""The Jepsen-style counts of several chaos runs under one schedule (`chaos --runs N`), summed."""

from __future__ import annotations

LISTED = ("re_executed", "guarded_re_executed", "at_risk", "model_reruns", "never_ran")


def totals(audits: list[dict]) -> dict:
    """The Jepsen-style counts summed over several runs' audits, and how many runs completed."""
    keys = [k for k, v in audits[0].items() if isinstance(v, int) and not isinstance(v, bool)]
    out = {k: sum(a.get(k, 0) for a in audits) for k in keys}
    for name in LISTED:  # a user workflow's audit lists these: counted
        if isinstance(audits[0].get(name), list):
            out[name] = sum(len(a.get(name) or []) for a in audits)
    out["runs"] = len(audits)
    out["runs_completed"] = sum(a.get("workflow_status") == "COMPLETED" for a in audits)
    return out
