"""`checkpoint-tui status`: one run as its own workload reads it, from the ledger and, when a server is
reachable, Temporal's history; where history cannot be read there is no verdict, and what chaos said of
the run (its report in run/) is cited instead."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import replace
from typing import TYPE_CHECKING

from checkpoint_tui.errors import Exit, UsageError
from checkpoint_tui.settings import Settings

if TYPE_CHECKING:
    from temporalio.client import Client

    from checkpoint_tui.workloads import Adapter


def status(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    """One run (the latest by default) as its own workload reads it: from the ledger, and from Temporal
    when a server is reachable (status never starts one)."""
    from checkpoint_tui.core.status_text import no_runs
    from checkpoint_tui.ledger import queries
    from checkpoint_tui.ledger.store import connect

    run_id = args.run
    if run_id is None:
        # status never creates a ledger: a home with none has no runs yet
        run_id = queries.latest_run_id(connect(settings.ledger)) if settings.ledger_exists else None
        if run_id is None:
            print(json.dumps({"run_id": None}) if args.as_json else no_runs(settings))
            return Exit.OK
    elif not settings.ledger_exists:
        raise UsageError(f"no run {run_id!r}: {settings.home} has no ledger yet")
    row = queries.run(connect(settings.ledger), run_id)
    if row is None:
        raise UsageError(f"no run {run_id!r} in {settings.ledger_label}")
    report = asyncio.run(_status(settings, workload.of_run(row), row))
    if not report.read:  # no verdict of its own: chaos's, where its report of the run is on disk
        from checkpoint_tui.proof.chaos.verdicts import chaos_verdicts

        said = chaos_verdicts(settings.run_dir, run_id)
        report.doc["chaos_reports"] = said
        report = replace(report, text="\n".join([report.text, *(f"{s['path']}: {s['line']}" for s in said)]))
    print(json.dumps(report.doc, indent=2, sort_keys=True) if args.as_json else report.text)
    return Exit.OK if report.read else Exit.UNAVAILABLE


async def _status(settings: Settings, workload, row):
    from temporalio.service import RPCError

    from checkpoint_tui.core.history import workflow_status
    from checkpoint_tui.core.stuck import stuck_task

    client = await peek_client(settings)
    wf_status, stuck = None, None
    if client is not None:
        try:
            wf_status = await workflow_status(client, row.run_id)
            stuck = await stuck_task(client, row.run_id) if wf_status == "RUNNING" else None
        except RPCError:  # gone since: as unreachable
            client = None
    report = await workload.status(settings, client, row, wf_status)
    report.doc["stuck_task"] = stuck.to_dict() if stuck is not None else None
    return replace(report, text=report.text + f"\nno progress    {stuck.line()}") if stuck is not None else report


async def peek_client(settings: Settings) -> Client | None:
    """A client of this home's Temporal if one is reachable now, else None: status never starts a dev server."""
    from temporalio.service import RPCError

    from checkpoint_tui.errors import CheckpointError
    from checkpoint_tui.ops import devserver
    from checkpoint_tui.ops.temporal import connect_client

    if settings.embedded:
        ident, rec = devserver.recorded(settings)
        if ident is None or rec is None:
            return None
        address = rec["address"]
    else:
        address = settings.temporal_address or ""
    try:
        return await connect_client(settings, address, timeout=3.0)
    except (CheckpointError, RPCError):
        return None
