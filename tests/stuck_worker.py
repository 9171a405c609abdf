"""A user's worker whose runs cannot make progress, for the tests of issue 38's "said out loud":

    python tests/stuck_worker.py   (TEMPORAL_ADDRESS, CHECKPOINT_TASK_QUEUE as the lab sets them)

- Stuck: its workflow code raises, so every workflow task fails and Temporal retries it forever (as
  a LangGraph graph with a sync router does);
- NeverRuns: its activity raises before it does anything (as a framework's node that finds no
  message to act on), three attempts, then the workflow fails."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from plain_worker import serve


@activity.defn
async def act_on_last_message(state: dict) -> str:
    raise ValueError("No AIMessage found in input")  # before any effect: nothing was claimed


@workflow.defn
class Stuck:
    @workflow.run
    async def run(self) -> str:
        raise NotImplementedError("a sync call in the workflow sandbox")


@workflow.defn
class NeverRuns:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            act_on_last_message,
            {"messages": []},
            start_to_close_timeout=timedelta(seconds=5),
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=100)),
        )


if __name__ == "__main__":
    serve([Stuck, NeverRuns], [act_on_last_message])
