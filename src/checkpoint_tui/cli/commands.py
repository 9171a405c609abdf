"""One function per command. Each takes the parsed arguments, the settings and the invocation's one
workload (cli/workload_flags.py builds it: our loop, or a user's workflow), validates what the parser
could not, and only then starts anything. No command asks which workload it runs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from checkpoint_tui.cli import workload_flags
from checkpoint_tui.cli.chaos_flags import (
    BUNDLES_OURS,
    chaos_line,
    check_chaos_flags,
    read_destinations,
    until_covered_bound,
)
from checkpoint_tui.errors import Exit, Failed, Unavailable, UsageError
from checkpoint_tui.settings import ConnectionOptions, Settings, load_settings

if TYPE_CHECKING:
    from checkpoint_tui.workloads import Adapter, Counts

# Commands that need no task queue (and must work while a shared ledger is down).
QUEUELESS = ("status", "stop", "model-server", "replay")
# Commands that run no workload (they stop, supervise or serve what the home has): its flags are
# checked, it is not built (its classes import our workflow and the SDK's worker: 0.3 s of CPU).
WORKLOADLESS = ("stop", "supervise", "worker", "model-server")


def dispatch(args: argparse.Namespace) -> int:
    if (args.verify_junit or args.verify_proof) and not args.verify:
        raise UsageError("--junit/--proof before the command go with --verify (chaos and replay take their own)")
    if args.strict_latency and not args.verify:
        raise UsageError("--strict-latency goes with --verify")
    workload_flags.fold_fleet(args)  # --worker QUEUE=CMD ...: the workflow's command first
    workload_flags.check_pairing(args, bool(args.worker_cmd))
    if args.command in WORKLOADLESS and not args.verify:
        workload_flags.check_workload_flags(args)
        return args.func(args, settings_from(args), None)
    workload = workload_flags.build_workload(args)
    settings = settings_from(args)
    if args.verify:
        return verify(args, settings, workload)
    func = getattr(args, "func", None)
    return tui(args, settings, workload) if func is None else func(args, settings, workload)


def temporal_from(args: argparse.Namespace) -> tuple[str | None, str | None, ConnectionOptions]:
    """Where Temporal is and how to reach it: the flags, over Temporal's environment configuration when
    it is asked for (settings/temporal_config.py), over the lab's defaults."""
    from checkpoint_tui.settings.connection import merged
    from checkpoint_tui.settings.temporal_config import load_target

    flags = ConnectionOptions(
        args.tls_cert, args.tls_key, args.tls_ca, args.temporal_api_key, tls_server_name=args.tls_server_name
    )
    target = load_target(args.profile, args.config_file)
    address = args.temporal_address or os.environ.get("CHECKPOINT_TEMPORAL_ADDRESS") or None
    if target is None:
        return address, args.namespace, flags  # load_settings adds what a parent lab passed in the environment
    return address or target.address, args.namespace or target.namespace, merged(flags, target.connection)


def settings_from(args: argparse.Namespace) -> Settings:
    """The flags' settings with the user's worker commands; a command that runs work, on the task
    queue its shared ledger names."""
    address, namespace, connection = temporal_from(args)
    settings = load_settings(
        args.home,
        address,
        namespace,
        args.model_url,
        args.model,
        connection,
        ledger_url=args.ledger,
        artifacts=args.artifacts,
        task_queue=args.task_queue,
        pool_size=args.workers or 1,
    )
    settings = workload_flags.with_worker_cmd(args, replace(settings, spare=not args.no_spare))
    if args.workers is None and not args.verify and args.command != "doctor":  # they measure one worker's kills
        from checkpoint_tui.ops.preload import default_pool

        settings = replace(settings, pool_size=default_pool(settings))
    if args.command not in QUEUELESS and not args.verify:
        from checkpoint_tui.ledger.store import with_shared_queue

        settings = with_shared_queue(settings)
    return settings


def tui(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    """The app; `n` starts the workload (a user's: the --workflow / --input given before any command)."""
    from checkpoint_tui.tui.app import run_app

    with lab(settings, "the app", exclusive=False):
        return run_app(settings, workload, refresh=args.refresh, stats_path=Path(args.stats) if args.stats else None)


def lab(settings: Settings, name: str, exclusive: bool):
    """One lab per home (ops/lab_lock.py), taken once a command's flags are checked and before it
    starts anything: the experiments (chaos, --verify, doctor starting a run) hold the home alone; the app, `start`
    and `compare` (the app's lesson runs it on the app's home) share it. `status`, `replay`, `stop`
    take nothing: they read, or end the lab; `supervise` runs under chaos, which holds it."""
    from checkpoint_tui.ops import lab_lock

    return lab_lock.hold(settings, name, exclusive)


@contextlib.contextmanager
def experiment(settings: Settings, name: str) -> Iterator[None]:
    """An experiment's hold on the home (lab(), alone) and, however it ends (a verdict, an error, a
    SIGTERM), one line of what it leaves running and how to end it."""
    from checkpoint_tui.proof.chaos.command import say_left_running

    with lab(settings, name, exclusive=True):
        try:
            yield
        finally:
            say_left_running(settings)


def verify(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    from checkpoint_tui.proof.verify.harness import run_verify

    if args.verify_proof is not None and not workload.bundles:
        raise UsageError(BUNDLES_OURS)
    outputs = proof_outputs(args.verify_junit, args.verify_proof)
    json_path = Path(args.json_path) if args.json_path else None
    from checkpoint_tui.ops.sigterm import until_sigterm

    stopped = "--verify: stopped by SIGTERM (`stop`, or a CI timeout); its workers stopped"
    with lab(settings, "--verify", exclusive=True):
        work = run_verify(settings, workload, workload.verify_plan(settings), json_path, outputs, args.strict_latency)
        return asyncio.run(until_sigterm(work, stopped))


def proof_outputs(junit: Path | None, bundle: Path | None):
    """--junit / --proof of a proving command; the bundle's SVG is rendered by the TUI (imported only
    then: the headless commands never load Textual)."""
    from checkpoint_tui.proof.bundle.writer import ProofOutputs

    screenshot = None
    if bundle is not None:
        from checkpoint_tui.tui.screenshot import save_svg

        screenshot = save_svg
    return ProofOutputs(junit, bundle, screenshot)


def start(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    with lab(settings, "start", exclusive=False):
        return asyncio.run(start_workload(settings, workload, args.wait, args.runs))


async def start_workload(settings: Settings, workload: Adapter, wait: bool, runs: int = 1) -> int:
    """`start` of any workload: the worker (adopted or spawned, detached), `runs` runs of it at once
    (one run id per line); with `wait`, supervise them to their end (exit 0 only if every one COMPLETED)."""
    from temporalio.service import RPCError

    from checkpoint_tui.ops.supervisor import Supervisor
    from checkpoint_tui.ops.temporal import connect_client, resolve_address

    settings.ensure_dirs()
    address, _ = resolve_address(settings)
    client = await connect_client(settings, address)
    sup = Supervisor(settings, address, spare=wait)
    if wait:
        sup.acquire()  # respawn only if no other supervisor (e.g. the TUI) already owns this home
    await asyncio.to_thread(sup.ensure_worker)
    await workload.ready(settings, client, sup.primary)
    run_ids = []
    for _ in range(runs):
        try:
            run_ids.append(await workload.start(settings, client))
        except RPCError as err:
            said = str(err).splitlines()[0][:200]
            raise Unavailable(f"Temporal refused to start {workload.title()}: {said}") from None
        print(run_ids[-1], flush=True)
    if not wait:
        return Exit.OK
    async with sup.running():
        statuses = await asyncio.gather(
            *(workload.wait(settings, client, run_id, progress=runs == 1) for run_id in run_ids)
        )
    if runs > 1:  # one line per run: how it ended and its duplicates (COUNT(*) - COUNT(DISTINCT id))
        _print_ends(settings, run_ids, statuses)
    return Exit.OK if all(status == "COMPLETED" for status in statuses) else Exit.FAILED


def _print_ends(settings: Settings, run_ids: list[str], statuses: list[str | None]) -> None:
    from checkpoint_tui.ledger import queries
    from checkpoint_tui.ledger.store import connect

    conn = connect(settings.ledger)
    for run_id, status in zip(run_ids, statuses, strict=True):
        totals = queries.effect_totals(conn, run_id)
        print(f"{run_id}: {status} · {totals.rows} ledger rows · duplicates {totals.duplicates}", file=sys.stderr)
    done = sum(status == "COMPLETED" for status in statuses)
    print(f"{done}/{len(run_ids)} runs COMPLETED", file=sys.stderr, flush=True)


def stop(args: argparse.Namespace, settings: Settings, workload: Adapter | None) -> int:
    from checkpoint_tui.ops import chaos_supervisor, devserver, lab_lock, worker_proc
    from checkpoint_tui.ops.modelserver import stop_model_server

    # First the experiments holding the home (chaos, --verify, doctor): each ends as on a CI timeout
    # (its cleanup runs, it says it was stopped); left alone it would go on against a stopped lab.
    stopped = lab_lock.stop_experiments(settings)
    if (pid := chaos_supervisor.stop(settings)) is not None:  # first: it would respawn what follows
        stopped.append(f"chaos supervisor {pid}")
    recorded = worker_proc.load_all(settings)
    for worker in recorded:
        worker_proc.stop(settings, worker)
        worker_proc.forget(settings, worker.role, worker.slot)
        stopped.append(f"{worker.role} worker {worker.pid}")
    for worker in worker_proc.unrecorded(settings, {w.pid for w in recorded}):
        worker_proc.stop(settings, worker)
        stopped.append(f"unrecorded worker {worker.pid}")
    if settings.embedded:
        pid = devserver.stop_devserver(settings)
        if pid is not None:
            stopped.append(f"dev server {pid}")
    pid = stop_model_server(settings)
    if pid is not None:
        stopped.append(f"model server {pid}")
    print("stopped " + ", ".join(stopped) if stopped else "nothing of this home was running")
    return Exit.OK


def supervise(args: argparse.Namespace, settings: Settings, workload: Adapter | None) -> int:
    """A headless supervisor for this home until SIGTERM/SIGINT (used by `chaos`; handy on a server).
    `--bound-to PID` (chaos's own): the kernel SIGTERMs it when that process dies."""
    if args.bound_to is not None:
        from checkpoint_tui.ops.procs import bind_to_parent

        bind_to_parent(args.bound_to, signal.SIGTERM)  # SIGTERM: it stops as on a plain `kill`
    held = _stand_by(settings) if args.standby else None
    from checkpoint_tui.ops.failover import STICKY_ONLY

    assist = STICKY_ONLY if args.attempts_by_hop else True
    return asyncio.run(_supervise(settings, pool=False, held=held, assist=assist))


def _stand_by(settings: Settings) -> int:
    """Import what a supervisor runs on, then wait for the home's supervisor lock (free once its holder
    has gone: the kernel lets an flock go with the process, however it ended); the lock's descriptor,
    held from then on. Until then it touches nothing of the home but run/supervisor.lock."""
    import fcntl

    from checkpoint_tui.ops import supervisor, temporal  # noqa: F401  (the imports a start would pay for)
    from checkpoint_tui.ops.procs import open_lock

    settings.ensure_dirs()
    fd = open_lock(settings.run_dir / "supervisor.lock")
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def pool(args: argparse.Namespace, settings: Settings, workload: Adapter | None) -> int:
    """One host's pool of --workers N on a shared cluster and ledger, until SIGTERM/SIGINT."""
    return asyncio.run(_supervise(settings, pool=True))


async def _supervise(settings: Settings, pool: bool, held: int | None = None, assist: bool | str = True) -> int:
    from checkpoint_tui.ops.supervisor import Supervisor
    from checkpoint_tui.ops.temporal import resolve_address

    settings.ensure_dirs()
    address, _ = resolve_address(settings)
    sup = Supervisor(settings, address, assist=assist)
    if not sup.acquire(held):
        raise Failed(f"another supervisor already owns {settings.home}")
    sup.ensure_worker()
    pids = ", ".join(str(w.pid) for w in sup.pool_workers())
    if pool:
        from checkpoint_tui.settings import HOST

        print(
            f"pool on {HOST}: workers {pids} · task queue {settings.task_queue} · {address} "
            f"({settings.namespace}) · ledger {settings.ledger_label} · artifacts {settings.artifacts_dir}",
            flush=True,
        )
    else:
        print(f"supervising {settings.home}: worker {pids}", flush=True)
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    # supervise: the workers keep running and the next supervisor adopts them; a pool stops its own
    async with sup.running(stop_workers=pool):
        await stopping.wait()
    return Exit.OK


def _counts(args: argparse.Namespace, settings: Settings) -> Counts:
    """The seeded schedule's counts as the flags give them; the dev server killed only if it is the lab's."""
    from checkpoint_tui.workloads import Counts

    more = (args.pauses, args.partitions, args.resets, args.activity_pauses, args.activity_resets)
    from checkpoint_tui.cli.model_env import endpoints_from_environment

    given = endpoints_from_environment(settings) if args.model_faults else settings
    models = tuple(name for name, _ in given.model_endpoints)
    return Counts(args.kills, *more, server=settings.embedded, model_faults=args.model_faults, models=models)


def chaos(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    from checkpoint_tui.cli.model_env import for_events
    from checkpoint_tui.proof.chaos.command import chaos_command
    from checkpoint_tui.proof.chaos.fleet_lab import check_events
    from checkpoint_tui.proof.chaos.schedule import refuse_server_kills, save_schedule

    check_chaos_flags(args, workload)
    max_kills = until_covered_bound(args)  # flags that cannot go together, even when only saving
    seed = args.seed
    if args.chaos_schedule is not None:  # a file that cannot be read or run is a usage error
        events, steps, file_seed = workload.chaos_file(args.chaos_schedule)
        seed = file_seed if file_seed is not None else seed
    elif args.chaos_shrink is not None:
        events, steps, _ = workload.chaos_file(args.chaos_shrink)  # checked now; shrink reads it again
    else:
        events, steps = workload.chaos_schedule(seed, _counts(args, settings))  # one that cannot work: exit 2
        if args.chaos_save is not None:
            save_schedule(args.chaos_save, events, steps, seed)
            print(
                f"wrote {args.chaos_save} ({len(events)} events over {steps} {workload.units}; run it with "
                f"chaos --schedule {args.chaos_save})"
            )
            return Exit.OK
    refuse_server_kills(events, settings, args.chaos_schedule or args.chaos_shrink)
    settings = for_events(settings, events)  # a model fault's endpoint may be the environment's
    check_events(settings, events, str(args.chaos_schedule or args.chaos_shrink or "the schedule"))
    if args.chaos_shrink is not None:
        from checkpoint_tui.proof.chaos.shrink import shrink_command

        with experiment(settings, "chaos --shrink"):
            return asyncio.run(shrink_command(settings, args.chaos_shrink, lambda: workload.chaos_target(seed), steps))
    json_out = Path(args.chaos_json) if args.chaos_json else None
    outputs = proof_outputs(args.chaos_junit, args.chaos_proof)
    settings.ensure_dirs()
    read_destinations(workload, settings.run_dir)  # one that cannot be read: exit 2 before anything starts
    if args.every_window:
        from checkpoint_tui.proof.chaos.every_window import every_window_command

        aim = "tool" if args.aim == "any" else args.aim  # every tool: model requests have no effect of their own
        with experiment(settings, "chaos"):
            return asyncio.run(every_window_command(settings, seed, lambda: workload.chaos_target(seed, aim), json_out))
    target = workload.chaos_target(seed, args.aim, placed=args.chaos_schedule is None)
    target.allow_unexercised = args.allow_unexercised
    with experiment(settings, "chaos"):
        return asyncio.run(
            chaos_command(
                settings,
                seed,
                steps,
                events,
                target,
                chaos_line(args, workload, seed, steps),
                json_out,
                outputs,
                runs=args.runs,
                max_kills=max_kills,
                rate=args.rate,
            )
        )


def replay(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    from checkpoint_tui.proof.replay.command import Selection, replay_command

    selection = Selection(tuple(args.runs), args.all_runs, args.from_path)
    selection.check()  # exactly one source, before a server is started or a file written
    return asyncio.run(replay_command(settings, selection, args.export_dir, args.replay_junit, of_run=workload.of_run))


def compare(args: argparse.Namespace, settings: Settings, workload: Adapter) -> int:
    from checkpoint_tui.proof.measure.compare import compare_command

    if not 1 <= args.kill_at < args.steps:
        raise UsageError(f"--kill-at must be between 1 and {args.steps - 1} (below --steps)")
    with lab(settings, "compare", exclusive=False):
        return asyncio.run(compare_command(settings, args.steps, args.kill_at))


def model_server(args: argparse.Namespace, settings: Settings, workload: Adapter | None) -> int:
    from checkpoint_tui.ops.modelserver import ensure_model_server

    print(ensure_model_server(settings))
    return Exit.OK
