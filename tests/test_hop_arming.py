"""The hop's count of aimed tasks (proof/nemeses/hop.py), fed the messages Temporal sends: a crash point
armed for the k-th aimed first attempt lands on it, and, when that attempt went to a worker killed
before it ran (it never completes), on that activity's next attempt: the event is not lost for want
of a later activity."""

from __future__ import annotations

from temporalio.api.common.v1 import ActivityType, WorkflowExecution
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from checkpoint_tui.proof.nemeses.hop import AFTER, BEFORE, Hop


def _handed(hop: Hop, token: bytes, activity_id: str, attempt: int) -> None:
    task = rr.PollActivityTaskQueueResponse(
        task_token=token,
        workflow_execution=WorkflowExecution(workflow_id="run-1", run_id="exec-1"),
        activity_id=activity_id,
        activity_type=ActivityType(name="send_line"),
        attempt=attempt,
    )
    hop._handed_out(
        "/temporal.api.workflowservice.v1.WorkflowService/PollActivityTaskQueue", b"", task.SerializeToString()
    )


def _completed(token: bytes) -> bytes:
    return rr.RespondActivityTaskCompletedRequest(task_token=token, identity="1@vm").SerializeToString()


def test_an_after_effect_point_whose_task_never_completed_lands_on_its_retry():
    hop = Hop("127.0.0.1:1", "any", None, lambda identity: None)
    after = hop.arm(None, 2, AFTER)
    _handed(hop, b"t1", "1", 1)
    assert hop._take(_completed(b"t1"), AFTER) is None  # the first aimed task: not the second
    _handed(hop, b"t2", "2", 1)  # the second, handed to a worker another nemesis killed: no completion comes
    _handed(hop, b"t2-retry", "2", 2)
    held = hop._take(_completed(b"t2-retry"), AFTER)
    assert held is not None and held[0] is after and after.task is not None
    assert (after.task.activity_id, after.task.attempt, after.task.aimed_at) == ("2", 2, 2)


def test_a_retry_is_its_first_attempt_s_ordinal_not_a_new_one():
    hop = Hop("127.0.0.1:1", "any", None, lambda identity: None)
    before = hop.arm(None, 3, BEFORE)
    _handed(hop, b"a1", "1", 1)
    _handed(hop, b"a1-retry", "1", 2)  # not the second aimed task: the first again
    _handed(hop, b"a2", "2", 1)
    assert before.task is None and before in hop.armed
    _handed(hop, b"a3", "3", 1)
    assert before.task is not None and before.task.activity_id == "3" and before not in hop.armed
