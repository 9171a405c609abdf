"""A lab session: what the TUI drives, with no Textual in it. It boots the dev server, the client and
the embedded supervisor, and turns durable data into one `View` per poll."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from temporalio.client import Client

from checkpoint_tui.config import Settings
from checkpoint_tui.ledger.faults import FaultSpec, add_fault
from checkpoint_tui.ledger.store import connect, latest_run_id
from checkpoint_tui.ops.devserver import DevServer
from checkpoint_tui.ops.supervisor import KillReport, Supervisor
from checkpoint_tui.ops.temporal import connect_client, resolve_address
from checkpoint_tui.runs import cancel_run, start_run
from checkpoint_tui.snapshot import HistoryEvent, HistoryFollower, Snapshot, build_snapshot, workflow_status

SINCE_MARGIN_S = 2.0
NEXT_RUN = "next"  # faults planned for the next run are stored under this run id until it starts


@dataclass
class View:
    snapshot: Snapshot
    history: list[HistoryEvent] = field(default_factory=list)  # only events not delivered before
    run_changed: bool = False  # a different run than the last View: panes start afresh
    address: str = ""
    ui_url: str | None = None
    namespace: str = "default"
    supervisor_state: str = "starting"
    worker_pid: int | None = None
    spare_pid: int | None = None
    pool_pids: list[int] = field(default_factory=list)  # every active worker of a --workers N pool
    ledger: str | None = None  # a shared ledger's label; None: this home's SQLite file
    owner: bool = False
    planned_faults: list[str] = field(default_factory=list)


class LabSession:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.address = ""
        self.server: DevServer | None = None
        self.client: Client | None = None
        self.supervisor: Supervisor | None = None
        self.run_id: str | None = None
        self._history: HistoryFollower | None = None
        # One thread for all of this session's ledger reads: one connection, so its data_version
        # tells whether anything was committed since the last poll.
        self._db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot")
        self._last: tuple[str | None, object, Snapshot] | None = None  # (run, data_version, snapshot)
        self._since: float | None = None
        self._closed: dict[str, str] = {}  # rows written before this were delivered already
        self._watch: asyncio.Task | None = None

    async def boot(self) -> None:
        self.settings.ensure_dirs()
        self.address, self.server = await asyncio.to_thread(resolve_address, self.settings)
        self.client = await connect_client(self.settings, self.address)
        sup = Supervisor(self.settings, self.address, self.client)
        sup.acquire()  # if another supervisor owns the home we only observe (no respawn, no spare)
        await asyncio.to_thread(sup.ensure_worker)
        self.supervisor = sup
        self._watch = asyncio.create_task(sup.run())
        self.run_id = latest_run_id(connect(self.settings.ledger))

    async def poll(self) -> View:
        """One View. The first poll of a run carries all its rows; later ones only rows written since
        the previous poll began (minus a margin for writes committed just after they were stamped)."""
        run_id = self.run_id
        reset = self._history is None or self._history.run_id != run_id
        since = None if reset else self._since
        started = time.time()
        loop = asyncio.get_running_loop()
        snap = await loop.run_in_executor(self._db_thread, self._build, run_id, since)
        self._since = started - SINCE_MARGIN_S
        history: list[HistoryEvent] = []
        if reset and self._history is not None:
            await self._history.stop()
            self._history = None
        if run_id is not None and self.client is not None:
            snap.workflow_status = await self._workflow_status(run_id)
            if self._history is None:
                row = (
                    connect(self.settings.ledger)
                    .execute("SELECT first_execution FROM runs WHERE run_id = ?", (run_id,))
                    .fetchone()
                )
                self._history = HistoryFollower(self.client, run_id, row["first_execution"] if row else None)
            self._history.ensure_following()
            history = self._history.drain()
        sup = self.supervisor
        return View(
            snapshot=snap,
            history=history,
            run_changed=reset,
            address=self.address,
            ui_url=self.server.ui_url if self.server else None,
            namespace=self.settings.namespace,
            supervisor_state=sup.state if sup else "starting",
            worker_pid=sup.active.pid if sup and sup.active else None,
            spare_pid=sup.spare.pid if sup and sup.spare else None,
            pool_pids=[w.pid for w in sup.workers()] if sup else [],
            ledger=self.settings.ledger_label if self.settings.ledger_url else None,
            owner=bool(sup and sup.owner),
            planned_faults=self._planned(),
        )

    def _build(self, run_id: str | None, since: float | None) -> Snapshot:
        conn = connect(self.settings.ledger)
        version = conn.data_version()
        last = self._last
        if since is not None and last is not None and last[0] == run_id and last[1] == version:
            # Nothing was committed since the last poll: same figures, no changed rows.
            return replace(last[2], steps=[], effects=[], partial=True)
        snap = build_snapshot(conn, self.settings, run_id, since=since)
        self._last = (run_id, version, snap)
        return snap

    async def _workflow_status(self, run_id: str) -> str | None:
        """Temporal's status; a closed workflow's status is final, so it is asked once."""
        cached = self._closed.get(run_id)
        if cached:
            return cached
        assert self.client is not None
        status = await workflow_status(self.client, run_id)
        if status not in (None, "RUNNING"):
            self._closed[run_id] = status
        return status

    def _planned(self) -> list[str]:
        rows = connect(self.settings.ledger).execute(
            "SELECT kind, step, effect_kind, count FROM faults WHERE run_id IN (?, ?) AND fired < count ORDER BY id",
            (NEXT_RUN, self.run_id or ""),
        )
        return [FaultSpec(r["kind"], r["step"], r["count"], r["effect_kind"]).describe() for r in rows]

    async def new_run(self, steps: int, pace: float) -> str:
        assert self.client is not None
        conn = connect(self.settings.ledger)
        planned = [
            FaultSpec(r["kind"], r["step"], r["count"], r["effect_kind"])
            for r in conn.execute("SELECT * FROM faults WHERE run_id = ? AND fired < count", (NEXT_RUN,))
        ]
        self.run_id = await start_run(self.settings, self.client, steps, pace, planned)
        conn.execute("DELETE FROM faults WHERE run_id = ?", (NEXT_RUN,))
        return self.run_id

    def plan_fault(self, fault: FaultSpec, for_current_run: bool) -> str:
        target = self.run_id if for_current_run and self.run_id else NEXT_RUN
        add_fault(connect(self.settings.ledger), target, fault)
        return target

    async def kill(self) -> KillReport:
        if self.supervisor is None or self.supervisor.active is None:
            raise RuntimeError("no worker to kill")
        if not self.supervisor.owner:
            raise RuntimeError("another supervisor owns this home; kill from there")
        return await self.supervisor.kill(reason="user pressed k")

    async def cancel(self) -> None:
        if self.client is not None and self.run_id is not None:
            await cancel_run(self.client, self.run_id)

    def runs(self, limit: int = 200) -> list[dict]:
        rows = connect(self.settings.ledger).execute(
            "SELECT r.run_id, r.status, r.total_steps, r.created_at, "
            "(SELECT COUNT(*) FROM steps s WHERE s.run_id = r.run_id AND s.status = 'completed') AS done "
            "FROM runs r ORDER BY r.created_at DESC LIMIT ?",
            (limit,),
        )
        return [dict(r) for r in rows]

    def comparison(self):
        """The latest naive-vs-durable comparison, counted now from the outbox files and SQLite."""
        from checkpoint_tui.compare import read_comparison

        return read_comparison(self.settings)

    async def run_comparison(self, steps: int = 6, kill_step: int = 3) -> None:
        from checkpoint_tui.compare import compare_command

        await compare_command(self.settings, steps, kill_step)

    async def run_chaos(self, seed: int, steps: int = 12, kills: int = 6) -> dict:
        """A chaos schedule in a home of its own (run/chaos): it kills a supervisor and the dev server,
        which must not be this app's. Returns the report chaos wrote to disk."""
        chaos_home = self.settings.run_dir / "chaos"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "checkpoint_tui", "--home", str(chaos_home), "chaos",
            "--seed", str(seed), "--steps", str(steps), "--kills", str(kills),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await proc.wait()
        stop = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "checkpoint_tui", "--home", str(chaos_home), "stop",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await stop.wait()  # the chaos home's worker and dev server are not the app's: leave nothing running
        report = chaos_home / "run" / f"chaos-seed{seed}.json"
        if not report.exists():
            raise RuntimeError(f"chaos wrote no report (exit {proc.returncode}); see {chaos_home / 'run'}")
        return json.loads(report.read_text())

    def view_run(self, run_id: str) -> None:
        self.run_id = run_id  # the next poll sees a new run and delivers it whole

    async def shutdown(self, stop_everything: bool = False) -> None:
        """`q` leaves the worker and the dev server running (the next start adopts them);
        `ctrl+q` stops them too."""
        if self.supervisor is not None:
            await self.supervisor.stop(stop_workers=stop_everything)
        if self._history is not None:
            await self._history.stop()
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        self._db_thread.shutdown(wait=False)
        if stop_everything and self.settings.embedded:
            from checkpoint_tui.ops.devserver import stop_devserver

            await asyncio.to_thread(stop_devserver, self.settings)
