"""A user's workflow names its activities (their ids and types), and chaos reads the pending ones from
Temporal's describe when an activity pause or reset fires, or a workflow reset notes what was in
flight: those names reach the report, the terminal and JUnit bounded and without control characters,
as history's own are (core/activity_history.py `plain`), while Temporal is still asked about the real
id. No server: the client is a stand-in that answers describe and records the requests."""

from __future__ import annotations

import json
from types import SimpleNamespace

from temporalio.api.common.v1 import ActivityType
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo

from checkpoint_tui.ledger.rows import WorkerEvent
from checkpoint_tui.proof.nemeses import activity_faults as activity_nemeses
from checkpoint_tui.proof.nemeses import resets
from checkpoint_tui.proof.nemeses.activity_faults import ACTIVITY_RESET

HOSTILE_ID = "\x1b]0;owned\x07\x1b[2J" + "i" * 5000  # a terminal title, a clear screen, then 5000 bytes
HOSTILE_TYPE = "\x1b[31mSend\r\nFAKE PASS\x00" + "t" * 5000


class FakeClient:
    """describe() names one running activity; every request made is kept."""

    namespace = "default"

    def __init__(self) -> None:
        self.requests: list = []
        pending = PendingActivityInfo(
            activity_id=HOSTILE_ID,
            activity_type=ActivityType(name=HOSTILE_TYPE),
            attempt=1,
            state=PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        )
        desc = SimpleNamespace(run_id="exec-1", raw_description=SimpleNamespace(pending_activities=[pending]))

        async def describe():
            return desc

        async def record(request):
            self.requests.append(request)
            return SimpleNamespace(run_id="exec-2")

        self.handle = SimpleNamespace(describe=describe)
        self.workflow_service = SimpleNamespace(reset_activity=record, reset_workflow_execution=record)

    def get_workflow_handle(self, *args, **kwargs):
        return self.handle


def shown(text: str) -> bool:
    """Fit for a terminal line and a report: short, and no control character."""
    return len(text) <= 128 and not any(ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F for ch in text)


async def test_an_activity_reset_reports_the_names_bounded_and_asks_about_the_real_id():
    client = FakeClient()
    hit = await activity_nemeses.fire(client, ACTIVITY_RESET, None, "run-1", prefer=HOSTILE_ID[:64])
    detail = hit.detail
    assert shown(detail["activity_id"]) and shown(detail["activity_type"]), detail
    assert client.requests[0].id == HOSTILE_ID  # Temporal is asked about the activity as it is named
    line = activity_nemeses.describe({**detail, "attempt_after": 2, "interrupted": True})
    assert "\x1b" not in line and "\n" not in line and len(line) < 400, line


async def test_a_reset_notes_what_was_in_flight_bounded():
    client = FakeClient()
    done = await resets.reset_to(client, "run-1", "exec-1", 7, "reset to activity 2")
    (flight,) = done["in_flight"]
    assert shown(flight["activity_id"]) and shown(flight["type"]) and flight["started"], flight
    assert done["new_execution"] == "exec-2" and client.requests[0].workflow_task_finish_event_id == 7


async def test_an_assist_records_the_dead_worker_s_activities_bounded(tmp_path):
    """ops/failover.py fails the dead worker's pending attempts by id and keeps what it failed in the
    worker event's detail: the ledger row and the worker events pane get the names cut and cleaned."""
    from checkpoint_tui.ledger.store import connect
    from checkpoint_tui.ops import failover

    names = ("w-dead@host", "w-other@host")
    client, failed_ids, failed, reset = FakeClient(), [], {n: [] for n in names}, {n: [] for n in names}
    pending = client.handle  # describe() names HOSTILE_ID, last run by the dead worker
    (info,) = (await pending.describe()).raw_description.pending_activities
    info.last_worker_identity = "w-dead@host"

    async def fail(err):
        return None

    def activity_handle(workflow_id, run_id, activity_id):
        failed_ids.append(activity_id)
        return SimpleNamespace(fail=fail)

    client.get_async_activity_handle = activity_handle
    dead = SimpleNamespace(name="w-dead@host", pid=4242, user_cmd=("worker",))
    other = SimpleNamespace(name="w-other@host", pid=7, user_cmd=("worker",))  # died in the same pass
    client.workflow_service.reset_sticky_task_queue = client.workflow_service.reset_activity
    conn = connect(tmp_path / "checkpoint.db")
    await failover._assist_run(
        SimpleNamespace(namespace="default"), client, conn, [other, dead], "run-1", failed, reset
    )
    assert failed_ids == [HOSTILE_ID]  # Temporal is asked about the real id
    assert failed["w-other@host"] == [] and reset == {"w-dead@host": ["run-1"], "w-other@host": []}  # by its holder
    (entry,) = failed["w-dead@host"]
    assert len(entry) <= 400 and not any(ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F for ch in entry), entry


async def test_a_late_pass_says_it_reset_no_sticky_queue_and_names_the_pass_it_shared(tmp_path):
    """The late pass fails what the dead workers still hold and resets nothing: its event says 0 resets
    (the pane reads a missing key as a reset), and the pass's figures and the other worker of the pass."""
    from checkpoint_tui.ledger.store import connect, create_run
    from checkpoint_tui.ops import failover
    from checkpoint_tui.settings import Settings
    from checkpoint_tui.tui.panes.worker_events import describe

    settings = Settings(home=tmp_path)
    settings.ensure_dirs()
    conn = connect(settings.ledger)
    create_run(conn, "run-1", 3, 0.0, "offline", settings.task_queue)
    client = FakeClient()
    (info,) = (await client.handle.describe()).raw_description.pending_activities
    info.last_worker_identity = "w-dead@host"

    async def fail(err):
        return None

    client.get_async_activity_handle = lambda **kw: SimpleNamespace(fail=fail)
    dead = SimpleNamespace(name="w-dead@host", pid=4242, user_cmd=("worker",))
    other = SimpleNamespace(name="w-other@host", pid=7, user_cmd=("worker",))
    await failover.assist(settings, client, [dead, other, dead], late=True)
    rows = conn.execute("SELECT * FROM worker_events WHERE event = 'assist'").fetchall()
    assert [r["pid"] for r in rows] == [4242]  # once, and not for the worker it failed nothing of
    detail = json.loads(rows[0]["detail"])
    assert detail["late"] and detail["sticky_reset"] == [] and detail["with"] == [7]
    assert detail["asked"] == detail["answered"] == 1 and detail["pass_s"] >= 0
    line = describe(WorkerEvent.of(rows[0]))
    assert "failed 1 pending activity attempt(s) by id, reset 0 run(s)' sticky queue" in line, line
