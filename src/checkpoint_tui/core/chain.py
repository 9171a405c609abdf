"""A workflow's chain of executions as Temporal recorded it: where the chain starts, what comes after
each execution (the one it continued as new into, or the one a reset of it made), and every event of
the chain read at once. The timeline, `status`, chaos, the audit and `replay` read it through
`read_chain`; the history pane follows it live (core/history.py) and asks `next_execution` the way."""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from checkpoint_tui.core.history_codec import decoded

MAX_EVENTS = 200_000  # a history read stops here (Temporal's own default limit is 51,200 per execution)


@dataclass
class Chain:
    """Every event of a workflow's chain (raw protobuf events, per execution). A workflow reset makes a
    new execution that holds the old one's events up to the reset point: it takes the old one's place
    in `executions`, and the old one, whole, goes to `replaced` (what it ran after the reset point
    was run again by its replacement)."""

    workflow_id: str
    executions: list[tuple[str, list]] = field(default_factory=list)  # (Temporal run id, events)
    replaced: list[tuple[str, list]] = field(default_factory=list)  # executions a reset replaced, whole
    # Both kinds in the order they were read (a replaced execution just before the one that replaced
    # it): the histories a replay must pass, each as Temporal holds it (never decoded by a team's codec:
    # replay runs the team's code on it, and an export must not hold its payloads in the clear).
    as_read: list[tuple[str, list]] = field(default_factory=list)
    missing: bool = False  # Temporal answered NOT_FOUND (unknown, or past retention): the rest is unread
    children: list[Chain] = field(default_factory=list)  # its child workflows' chains (read_children), in order

    @property
    def events(self) -> list:
        return [ev for _, events in self.executions for ev in events]


MAX_CHILD_DEPTH = 6  # child workflows of child workflows ... read this far down
MAX_CHILDREN = 64  # child workflows read per run (each a history read)


async def read_chain(
    client: Client, workflow_id: str, first_execution: str | None = None, max_events: int | None = MAX_EVENTS
) -> Chain:
    """Every execution of the workflow, first to last (see `next_execution`), until `max_events` events
    have been read (None: no bound). Without `first_execution`, the latest execution's started event
    names the chain's first. A workflow Temporal does not know gives an empty chain, `missing`."""
    chain = Chain(workflow_id)
    try:
        execution = first_execution or await _first_execution(client, workflow_id)
        total = 0
        while execution is not None and (max_events is None or total < max_events):
            handle = client.get_workflow_handle(workflow_id, run_id=execution)
            events = [ev async for ev in handle.fetch_history_events()]
            total += len(events)
            chain.as_read.append((execution, events))  # as Temporal holds it: what replay and exports get
            shown = await decoded(client, events)  # a team's converter's payloads as JSON, for the audit
            nxt, by_reset = await next_execution(client, workflow_id, execution, events[-1] if events else None)
            # the reset's execution holds this one's events up to the reset point: it takes its place
            (chain.replaced if by_reset else chain.executions).append((execution, shown))
            execution = nxt
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        chain.missing = True
    return chain


def all_executions(chain: Chain) -> list[tuple[str, list]]:
    """The chain's executions, then each child workflow's (depth first): every activity of the run."""
    return [*chain.executions, *(x for child in chain.children for x in all_executions(child))]


async def read_children(
    client: Client, chain: Chain, depth: int = 0, budget: list[int] | None = None, done: dict | None = None
) -> None:
    """Read the chain's child workflows (and theirs, MAX_CHILD_DEPTH down; MAX_CHILDREN in all), each with its
    continue-as-new chain, into `chain.children`: a run's work done by its children is the run's. `done`: the
    closed children read before (by workflow and run id), not read again (a poll reads only open ones)."""
    budget = [MAX_CHILDREN] if budget is None else budget
    if depth >= MAX_CHILD_DEPTH:
        return
    for _, events in chain.executions:
        for ev in events:
            if not ev.HasField("child_workflow_execution_started_event_attributes") or budget[0] <= 0:
                continue
            budget[0] -= 1
            started = ev.child_workflow_execution_started_event_attributes.workflow_execution
            key = f"{started.workflow_id}\n{started.run_id}"
            child = done.get(key) if done is not None else None
            if child is None:
                child = await read_chain(client, started.workflow_id, started.run_id or None)
                await read_children(client, child, depth + 1, budget, done)
                if done is not None and _ended(child):
                    done[key] = child
            chain.children.append(child)


def _ended(chain: Chain) -> bool:
    """Its last execution closed for good (not continued as new), and so did every child it read."""
    last = chain.executions[-1][1] if chain.executions else []
    ends = ("completed", "failed", "timed_out", "canceled", "terminated")
    closed = bool(last) and any(last[-1].HasField(f"workflow_execution_{e}_event_attributes") for e in ends)
    return closed and all(_ended(c) for c in chain.children)


async def _first_execution(client: Client, workflow_id: str) -> str | None:
    """The chain's first execution, as the latest execution's started event names it."""
    async for ev in client.get_workflow_handle(workflow_id).fetch_history_events(page_size=1):
        attrs = ev.workflow_execution_started_event_attributes
        return attrs.first_execution_run_id or attrs.original_execution_run_id or None
    return None


async def next_execution(client: Client, workflow_id: str, execution: str, last) -> tuple[str | None, bool]:
    """What comes after an execution whose last event (so far) is `last`: the execution it continued as
    new into, or the one a reset of it made (then True: that one starts with a copy of this one's
    events up to the reset point); (None, False) when nothing does, or not yet."""
    if last is None:
        return None, False
    if (new := continued_as_new(last)) is not None:
        return new, False
    reset_to = await reset_run(client, workflow_id, execution, last)
    return reset_to, reset_to is not None


def continued_as_new(last) -> str | None:
    """The execution named by a continue-as-new event, None for any other event."""
    if last.HasField("workflow_execution_continued_as_new_event_attributes"):
        return last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id or None
    return None


async def reset_run(client: Client, workflow_id: str, execution: str, last) -> str | None:
    """The execution a reset of this one made (Temporal terminates the execution it resets), or None."""
    if not last.HasField("workflow_execution_terminated_event_attributes"):
        return None
    desc = await client.get_workflow_handle(workflow_id, run_id=execution).describe()
    new = desc.raw_description.workflow_extended_info.reset_run_id
    return new if new and new != execution else None
