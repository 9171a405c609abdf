"""Crash points that are certain: a gRPC hop between the workers and the Temporal frontend that sees
each activity task handed out and each completion sent back, and kills the worker at the point an
event names, whatever the worker's language and however fast its tool:

- `worker-before-effect`: the aimed task, handed out by Temporal (its attempt started), is held while
  its worker is killed: the attempt dies before its body ran, so before its effect;
- `worker-after-effect`: the aimed attempt's completion is held while its worker is killed: the body
  returned (its effect done), and Temporal never records it, so the activity runs again;
- `worker-after-record`: the completion goes through, and once Temporal has answered, the worker is
  killed: nothing may run again.

The hop forwards every call as bytes (metadata and deadlines as they came), and decodes only what it
needs with temporalio's own protobufs: the activity tasks of poll responses (and of eager activity
starts in workflow task completions), and the task token of completions. An aimed task is the k-th
first attempt of an activity the aim picks in the run's workflow, counted as tasks pass, so an event
armed late still lands on the next one; a retry counts as its first attempt (one handed to a worker
killed before it ran, by another nemesis, never completes: the event lands on its next attempt).
Loopback only: it listens on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from checkpoint_tui.core.activity_history import ActivityExec, decode_payload, label
from checkpoint_tui.frameworks import Classifier
from checkpoint_tui.proof.nemeses.aim import aimed
from checkpoint_tui.proof.nemeses.handed import Handed
from checkpoint_tui.proof.nemeses.processes import kill_worker_of
from checkpoint_tui.proof.nemeses.records import Hit
from checkpoint_tui.settings import Settings

BEFORE, AFTER, RECORDED = "worker-before-effect", "worker-after-effect", "worker-after-record"
HOP_KINDS = (BEFORE, AFTER, RECORDED)
WINDOWS = {
    BEFORE: "inside the attempt, before its effect",
    AFTER: "after its effect, before Temporal recorded it",
    RECORDED: "after Temporal recorded its completion",
}
_SERVICE = "/temporal.api.workflowservice.v1.WorkflowService/"
_POLL, _EAGER, _DONE, _FAILED, _CANCELED = (
    _SERVICE + m
    for m in (
        "PollActivityTaskQueue",
        "RespondWorkflowTaskCompleted",
        "RespondActivityTaskCompleted",
        "RespondActivityTaskFailed",
        "RespondActivityTaskCanceled",
    )
)
# A worker's answers to its tasks: Respond*TaskCompleted/Failed/Canceled, RecordActivityTaskHeartbeat
_SENT = (_SERVICE + "Respond", _SERVICE + "RecordActivityTaskHeartbeat")
_ANSWERS: dict[str, Callable[[bytes], Any]] = {  # a worker's answer to an activity task: its reader
    _DONE: rr.RespondActivityTaskCompletedRequest.FromString,
    _FAILED: rr.RespondActivityTaskFailedRequest.FromString,
    _CANCELED: rr.RespondActivityTaskCanceledRequest.FromString,
}
_DROP = {
    "grpc-timeout",
    "content-type",
    "user-agent",
    "te",
    "grpc-accept-encoding",
    "grpc-encoding",
    "grpc-status",
    "grpc-message",
}
_LIMIT = 128 * 1024 * 1024  # a workflow task with a long history is one message
MAX_TOKENS = 100_000  # task tokens remembered (a long run's first attempts), oldest forgotten


@dataclass
class Task:
    workflow_id: str
    execution: str  # Temporal's run id of the workflow execution
    activity_id: str
    activity_type: str
    attempt: int
    label: str
    cls: str  # model, tool, mcp or other (frameworks/)
    aimed_at: int | None  # its ordinal among its workflow's aimed first attempts, None when not aimed
    aimed_any: int | None = None  # its ordinal among every workflow's (the run's children count too)
    key: str = ""  # what makes it a tool of its own: the tool's name, else the activity type


@dataclass
class Arming:
    """Kill at the `ordinal`-th aimed first attempt of `workflow_id`'s activities (None: of any workflow on the
    lab's workers, the run's children included) or the next one, at `kind`."""

    workflow_id: str | None
    ordinal: int
    kind: str
    fired: asyncio.Event = field(default_factory=asyncio.Event)
    hit: Hit | None = None
    why: str | None = None  # fired, but could not kill (the poller is not a worker of ours)
    task: Task | None = None  # the task it fired on
    fresh: bool = False  # on the next aimed task of a tool not hit yet (chaos --every-window), whatever its ordinal


@dataclass(frozen=True)
class UpstreamTls:
    """The hop's TLS to the cluster: its CA (None: the system's), the client certificate and key."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = field(default=None, repr=False)
    server_name: str | None = None


def upstream_tls(settings: Settings) -> UpstreamTls:
    """The lab's own TLS to the cluster, for the hop: the files (or inline data) read once, the server's
    name (given, else the address's host: the hop's own address is not in the certificate)."""
    config = settings.connection.client_kwargs()["tls"]
    host = settings.temporal_address.rsplit(":", 1)[0].strip("[]") if settings.temporal_address else None
    if config is True:  # an API key alone (Temporal Cloud's way): the system's roots, the address's name
        return UpstreamTls(server_name=host)
    return UpstreamTls(config.server_root_ca_cert, config.client_cert, config.client_private_key, config.domain or host)


def watching_hop(settings: Settings, upstream: str) -> Hop:
    """A hop with no crash point: it records which worker holds which attempt (handed.py)."""
    tls = upstream_tls(settings) if settings.connection.tls else None
    return Hop(upstream, "", None, lambda who: kill_worker_of(settings, who), tls)


class Hop(grpc.GenericRpcHandler):
    def __init__(
        self,
        upstream: str,
        aim: str,
        framework: Classifier,
        kill: Callable[[str], Hit | None],
        tls: UpstreamTls | None = None,
    ) -> None:
        """`kill(identity)`: SIGKILL the worker of that identity if it is ours (a Hit), else None. `tls`:
        the cluster wants TLS (the workers then speak plain to the hop, their API key riding on). `aim`
        empty: no crash point (a hop that only records who holds what, for `handed`)."""
        self.upstream, self.aim, self.framework, self.kill = upstream, aim, framework, kill
        self.tls = tls
        self.handed: Handed | None = None  # who holds which attempt, failed when the lab kills it (handed.py)
        self.armed: list[Arming] = []
        self.tasks: dict[bytes, Task] = {}  # task token -> what it is
        self.ordinals: dict[tuple[str, str], tuple[int, int]] = {}  # (execution, activity id) -> its first attempt's
        self.counts: dict[str, int] = {}  # workflow id -> aimed first attempts seen
        self.any_count = 0  # aimed first attempts seen, of any workflow
        self.hit_keys: set[str] = set()  # the tools a kill has landed on
        self._channel: grpc.aio.Channel | None = None
        self._server: grpc.aio.Server | None = None

    async def start(self) -> str:
        """Listen on a free loopback port; returns its HOST:PORT for the workers."""
        opts = [("grpc.max_receive_message_length", _LIMIT), ("grpc.max_send_message_length", _LIMIT)]
        # After a dev server's restart, reconnect within 0.1-1 s (gRPC's default backoff grows to 120 s)
        backoff = [
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        if self.tls is None:
            self._channel = grpc.aio.insecure_channel(self.upstream, options=opts + backoff)
        else:
            named = [("grpc.ssl_target_name_override", self.tls.server_name)] if self.tls.server_name else []
            credentials = grpc.ssl_channel_credentials(self.tls.ca, self.tls.key, self.tls.cert)
            self._channel = grpc.aio.secure_channel(self.upstream, credentials, options=opts + backoff + named)
        self._server = grpc.aio.server(
            handlers=[self],
            options=[
                *opts,
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.max_ping_strikes", 0),
                ("grpc.http2.min_ping_interval_without_data_ms", 1000),
            ],
        )
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        if self.handed is not None:
            self.handed.watch()
        return f"127.0.0.1:{port}"

    async def close(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=0)
        if self._channel is not None:
            await self._channel.close()
        if self.handed is not None:  # after both: nothing is handed out any more
            await self.handed.close()

    def killed(self, hit: Hit) -> None:
        """The lab killed a worker beside the hop (a chaos event's SIGKILL): fail the attempts it held."""
        if self.handed is not None and hit.identity is not None and hit.pid is not None:
            self.handed.died(hit.identity, hit.pid, hit.at)

    def arm(self, workflow_id: str | None, ordinal: int, kind: str, fresh: bool = False) -> Arming:
        arming = Arming(workflow_id, ordinal, kind, fresh=fresh)
        self.armed.append(arming)
        return arming

    def disarm(self, arming: Arming) -> None:
        if arming in self.armed:
            self.armed.remove(arming)

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        method = details.method

        async def forward(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return await self._forward(method, request, context)

        return grpc.unary_unary_rpc_method_handler(forward)

    async def _forward(self, method: str, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        # A call is dropped only when its worker was killed: one that could not be (not ours) goes on as it came.
        if method == _DONE and (held := self._take(request, AFTER)) is not None and self._fire(*held):
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the lab killed this worker before its completion")
        asked_at = time.time()
        token = self._answering(method, request)  # on its way: a death from now on must not fail it over it
        response = await self._call(method, request, context, token)
        if method == _DONE and (held := self._take(request, RECORDED)) is not None:
            self._fire(*held)  # Temporal has answered: the completion is recorded
        elif (
            method in (_POLL, _EAGER)
            and (held := self._handed_out(method, request, response, asked_at))
            and self._fire(*held)
        ):
            # the task goes nowhere: its attempt started, its body never ran
            await context.abort(grpc.StatusCode.UNAVAILABLE, "the lab killed this worker as its task came")
        return response

    async def _call(
        self, method: str, request: bytes, context: grpc.aio.ServicerContext, token: bytes | None = None
    ) -> bytes:
        """Temporal's answer. A worker's answer (a task's completion, failure, heartbeat) whose worker is gone
        (killed) before Temporal's reply goes on all the same, as what a worker has sent reaches Temporal
        without a hop; any other call (a long poll) ends with its caller, as it does at Temporal. What
        Temporal hands out in reply to a caller gone (a workflow task completion's eager activities, a
        poll answered as it was cancelled) is failed at once (`handed`): nobody would run it before its
        timeout."""
        assert self._channel is not None
        metadata = [(k, v) for k, v in context.invocation_metadata() or () if not k.startswith(":") and k not in _DROP]
        left = context.time_remaining()
        timeout = None if left is None or left > 1e6 else left
        call = asyncio.ensure_future(self._channel.unary_unary(method)(request, metadata=metadata, timeout=timeout))
        if token is not None:  # an answer: the attempt is the lab's to fail again if Temporal did not take it
            call.add_done_callback(lambda done: self.handed.settle(token, done) if self.handed else None)
        try:
            return await (asyncio.shield(call) if method.startswith(_SENT) else call)
        except asyncio.CancelledError:
            call.add_done_callback(lambda done: self._gone(method, request, done))
            raise
        except grpc.aio.AioRpcError as err:  # Temporal's own answer, details (its -bin trailer) included
            trailer = [(k, v) for k, v in err.trailing_metadata() or () if k not in _DROP]
            context.set_trailing_metadata(trailer)
            await context.abort(err.code(), err.details() or "")
            raise  # abort raises; for the type checker

    def _answering(self, method: str, request: bytes) -> bytes | None:
        """The task token of a worker's answer to its activity task, now on its way."""
        if self.handed is not None and method in _ANSWERS:
            with contextlib.suppress(Exception):  # a message we cannot read is forwarded as it is
                token: bytes = _ANSWERS[method](request).task_token
                self.handed.answer(token)
                return token
        return None

    def _gone(self, method: str, request: bytes, done: asyncio.Future) -> None:
        """Temporal's answer to a call whose worker was gone: what it handed out is failed at once."""
        if done.cancelled() or done.exception() is not None or method not in (_POLL, _EAGER) or self.handed is None:
            return
        with contextlib.suppress(Exception):  # a message we cannot read: its attempt's timeout remains
            if method == _POLL:
                tasks = [rr.PollActivityTaskQueueResponse.FromString(done.result())]
                identity = rr.PollActivityTaskQueueRequest.FromString(request).identity
            else:
                tasks = list(rr.RespondWorkflowTaskCompletedResponse.FromString(done.result()).activity_tasks)
                identity = rr.RespondWorkflowTaskCompletedRequest.FromString(request).identity
            if not (tasks := [t for t in tasks if t.task_token]):
                return
            if self.aim:  # counted as handed out: its retry is the same aimed task
                for task in tasks:
                    self._learn(task)
            self.handed.handed(tasks, identity, time.time(), gone=True)

    def _handed_out(
        self, method: str, request: bytes, response: bytes, asked_at: float | None = None
    ) -> tuple[Arming, str] | None:
        """Learn the activity tasks a response hands out; the aimed one of an event armed before it comes."""
        with contextlib.suppress(Exception):  # a message we cannot read is forwarded as it is
            if method == _POLL:
                tasks = [rr.PollActivityTaskQueueResponse.FromString(response)]
            else:  # eager starts: the (large) request is read only when the response holds tasks
                tasks = list(rr.RespondWorkflowTaskCompletedResponse.FromString(response).activity_tasks)
            tasks = [task for task in tasks if task.task_token]
            asked = rr.PollActivityTaskQueueRequest if method == _POLL else rr.RespondWorkflowTaskCompletedRequest
            if tasks and self.handed is not None:
                self.handed.handed(tasks, asked.FromString(request).identity, asked_at or time.time(), gone=False)
            seen = [self._learn(task) for task in tasks] if self.aim else []  # every one
            due = next(((a, t) for t in seen if (a := self._due(t, BEFORE)) is not None), None)
            if due is not None:
                return due[0], asked.FromString(request).identity
        return None

    def _learn(self, task: rr.PollActivityTaskQueueResponse) -> Task:
        act = ActivityExec(
            0,
            0,
            task.workflow_execution.run_id,
            task.activity_id,
            task.activity_type.name,
            time.time(),
            attempt=task.attempt,
        )
        act.args = [decode_payload(p) for p in list(task.input.payloads)[:16]]
        label([act], self.framework)
        workflow_id, ordinal, any_ordinal = task.workflow_execution.workflow_id, None, None
        first = (task.workflow_execution.run_id, task.activity_id)
        if task.attempt == 1 and aimed(self.aim, act):
            ordinal = self.counts[workflow_id] = self.counts.get(workflow_id, 0) + 1
            any_ordinal = self.any_count = self.any_count + 1
            if len(self.ordinals) >= MAX_TOKENS:
                self.ordinals.pop(next(iter(self.ordinals)))
            self.ordinals[first] = (ordinal, any_ordinal)
        elif task.attempt > 1:  # a retry is its first attempt's aimed task again: handed to a worker that was
            ordinal, any_ordinal = self.ordinals.get(first, (None, None))  # dying, that one never completed
        seen = Task(
            workflow_id,
            task.workflow_execution.run_id,
            task.activity_id,
            act.activity_type,
            task.attempt,
            act.label,
            act.cls,
            ordinal,
            any_ordinal,
            key=act.info.name if act.info is not None and act.info.name else act.activity_type,
        )
        if len(self.tasks) >= MAX_TOKENS:
            self.tasks.pop(next(iter(self.tasks)))
        self.tasks[task.task_token] = seen
        return seen

    def _take(self, request: bytes, kind: str) -> tuple[Arming, str] | None:
        """The completion of an aimed attempt, for an event of `kind` armed for it."""
        try:
            done = rr.RespondActivityTaskCompletedRequest.FromString(request)
        except Exception:  # noqa: BLE001 - not ours to read: forwarded as it is
            return None
        seen = self.tasks.get(done.task_token)
        arming = self._due(seen, kind) if seen is not None else None
        return (arming, done.identity) if arming is not None else None

    def _due(self, seen: Task, kind: str) -> Arming | None:
        """The armed event of `kind` this task is for: its workflow's, at its ordinal or past it."""
        if seen.aimed_at is None or seen.aimed_any is None:
            return None
        for arming in self.armed:
            ordinal = seen.aimed_any if arming.workflow_id is None else seen.aimed_at
            mine = arming.workflow_id in (None, seen.workflow_id)
            due = seen.key not in self.hit_keys if arming.fresh else ordinal >= arming.ordinal
            if arming.kind == kind and mine and due:
                arming.task = seen
                self.armed.remove(arming)  # one task each
                return arming
        return None

    def _fire(self, arming: Arming, identity: str) -> bool:
        """Kill the worker of `identity` for the armed event; True when it was killed (the call is dropped)."""
        try:
            hit = self.kill(identity)
        except Exception as err:  # noqa: BLE001 - a kill that raised is a miss, said; the call goes on
            hit, arming.why = None, f"the kill failed: {type(err).__name__}"
        task = arming.task
        assert task is not None
        detail = {
            "window": WINDOWS[arming.kind],
            "activity_id": task.activity_id,
            "label": task.label,
            "class": task.cls,
            "workflow_id": task.workflow_id,
            "execution": task.execution,
            "aimed_at": task.aimed_any,
        }
        if hit is None:
            arming.why = arming.why or f"the worker {identity[:80]!r} that held it is not one of this lab's"
        else:
            arming.hit = Hit(hit.at, hit.pid, hit.identity, detail)
            self.hit_keys.add(task.key)  # a tool a kill landed on (a miss leaves it to the next call)
            if self.handed is not None and hit.pid is not None:
                self.handed.died(identity, hit.pid, hit.at)
        arming.fired.set()
        return hit is not None
