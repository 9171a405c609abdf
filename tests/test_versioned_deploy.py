"""#54, a deploy with Worker Versioning (--deployment): examples/fleet's version 2 (not replay-safe) started
beside version 1 as a Worker Deployment Version, ramped, made current, rolled back by making version 1
current again. With auto-upgrade workflows the non-determinism error is named with the version that
hit it and the rollback drains them; with pinned ones there is none. On the real dev server, through the
real CLI; the slots and flags in between are unit-tested here too."""

from __future__ import annotations

import json
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.deployment.v1 import WorkerDeploymentVersion
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.history.v1 import HistoryEvent, WorkflowTaskCompletedEventAttributes
from temporalio.client import Client
from temporalio.common import VersioningBehavior as Behavior
from temporalio.common import WorkerDeploymentVersion as Version
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkerDeploymentConfig

from checkpoint_tui.core.chain import Chain
from checkpoint_tui.core.workflow_end import versions
from checkpoint_tui.ops import deployments, fleet
from checkpoint_tui.ops.user_worker import user_command
from checkpoint_tui.settings import FleetMember, Settings
from conftest import run_cli
from test_gameday import FLEET, PY, _fleet, _stop

V2 = f"{PY} {FLEET / 'workflow_worker_v2.py'}"


def _settings(tmp_path: Path, deployment: str | None = "mailer") -> Settings:
    return Settings(
        home=tmp_path,
        task_queue_name="wf",
        worker_cmd=("python", "w1.py"),
        fleet=(FleetMember("acts", ("python", "a.py")),),
        deploys=(FleetMember("wf", ("python", "w2.py")),),
        deployment=deployment,
        pool_size=2,
    )


def test_a_versioned_queue_has_slots_for_its_new_version_that_stand_by_until_deployed(tmp_path: Path):
    settings = _settings(tmp_path)
    settings.ensure_dirs()
    assert fleet.slot_count(settings) == 6  # two commands and the new version, two slots each
    old, acts, new = (fleet.member_of(settings, s) for s in (0, 2, 4))
    assert old.cmd == ("python", "w1.py") and old.build_id.startswith("v1-")
    assert acts.build_id is None  # only the --deploy queue is versioned
    assert new.cmd == ("python", "w2.py") and new.build_id.startswith("v2-") and new.queue == "wf"
    assert [fleet.standby(settings, s) for s in range(6)] == [False] * 4 + [True] * 2
    fleet.set_deployed(settings, "wf", True)
    assert not any(fleet.standby(settings, s) for s in range(6))
    assert fleet.member_of(settings, 0) == old  # version 1 keeps running beside it: not a rolling swap
    env = user_command(settings, "127.0.0.1:7233", new).env
    assert env["TEMPORAL_DEPLOYMENT_NAME"] == "mailer" and env["TEMPORAL_WORKER_BUILD_ID"] == new.build_id
    assert "TEMPORAL_WORKER_BUILD_ID" not in user_command(settings, "127.0.0.1:7233", acts).env
    # a changed command is a new version, never an old build id on new code
    other = replace(settings, deploys=(FleetMember("wf", ("python", "w3.py")),))
    assert other.versions[0].build_id != new.build_id and other.members[0].build_id == old.build_id
    # without --deployment: a rolling deploy, as before
    rolling = _settings(tmp_path, None)
    assert fleet.slot_count(rolling) == 4 and fleet.member_of(rolling, 0).cmd == ("python", "w2.py")


def _completed(build: str, behavior: int) -> HistoryEvent:
    attrs = WorkflowTaskCompletedEventAttributes(
        deployment_version=WorkerDeploymentVersion(deployment_name="mailer", build_id=build),
        versioning_behavior=behavior,
    )
    return HistoryEvent(workflow_task_completed_event_attributes=attrs)


def test_the_audit_counts_workflow_tasks_per_version_with_a_bound():
    pinned, auto = VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE
    events = [_completed("v1-a", auto), _completed("v1-a", auto), _completed("v2-b", pinned), HistoryEvent()]
    assert versions(Chain("w", [("r1", events)])) == {"v1-a (auto-upgrade)": 2, "v2-b (pinned)": 1}
    hostile = [_completed(f"v{i}-\x1b[31m", pinned) for i in range(100)]
    counted = versions(Chain("w", [("r1", hostile)]))
    assert len(counted) == 16 and not any("\x1b" in k for k in counted)


@workflow.defn(name="Idle")
class Idle:
    @workflow.run
    async def run(self) -> None:
        return None


async def test_an_experiment_starts_from_version_1_current_and_no_ramp_whatever_the_last_one_left(
    tmp_path: Path, temporal_address: str
):
    """A deploy that ended mid-ramp leaves version 2 ramping; making version 1 current does not end a ramp
    (measured: Temporal keeps it), so settle() ends it first. Against the real server's routing."""
    name = f"settle-{uuid.uuid4().hex[:8]}"
    settings = replace(
        _settings(tmp_path, name),
        task_queue_name=name,
        deploys=(FleetMember(name, ("python", "w2.py")),),
        temporal_address=temporal_address,
    )
    settings.ensure_dirs()
    old, new = deployments.old_and_new(settings)
    client = await Client.connect(temporal_address)

    def worker(build: str) -> Worker:
        config = WorkerDeploymentConfig(Version(name, build), True, Behavior.PINNED)
        return Worker(
            client,
            task_queue=name,
            workflows=[Idle],
            deployment_config=config,
            workflow_runner=UnsandboxedWorkflowRunner(),
        )

    async with worker(old), worker(new):
        assert await deployments.registered(client, settings, old) >= 0
        await deployments.registered(client, settings, new)
        await deployments.set_current(client, settings, old)
        await deployments.set_ramping(client, settings, new, 50.0)  # the deploy's ramp, never ended
        assert (await deployments.builds(client, settings))[1:] == (old, new)
        await deployments.settle(settings, client)
        assert (await deployments.builds(client, settings))[1:] == (old, None)
        await deployments.set_current(client, settings, new)  # a deploy with no rollback
        await deployments.settle(settings, client)
        assert (await deployments.builds(client, settings))[1:] == (old, None)
        fleet.set_deployed(settings, name, True)  # while deployed, the deploy routes it: left alone
        await deployments.set_current(client, settings, new)
        await deployments.settle(settings, client)
        assert (await deployments.builds(client, settings))[1] == new


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--deployment", "mailer"], "exactly one --deploy"),
        (["--deployment", "no.dots", "--deploy", f"v-wf={V2}"], "letters, digits"),
    ],
)
def test_a_deployment_without_its_deploy_or_with_a_bad_name_is_one_line_exit_2(tmp_path: Path, flags, said):
    done = run_cli(*_fleet(tmp_path / "home", "v", "127.0.0.1:1"), *flags, "chaos", "--workflow", "FleetMailer")
    assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_ramp_without_a_deployment_is_one_line_exit_2(tmp_path: Path):
    schedule = tmp_path / "s.json"
    schedule.write_text(json.dumps({"events": [{"at_s": 1, "nemesis": "deploy", "ramp_percent": 25}]}))
    done = run_cli(
        *_fleet(tmp_path / "home", "v", "127.0.0.1:1"),
        "--deploy",
        f"v-wf={V2}",
        "chaos",
        "--workflow",
        "FleetMailer",
        "--schedule",
        str(schedule),
    )
    assert done.returncode == 2 and "give --deployment" in done.stderr, done.stderr
    # and a deploy queue no worker command polls is one line too, not a crash when the runs start
    other = run_cli(
        "--home",
        str(tmp_path / "h2"),
        "--temporal-address",
        "127.0.0.1:1",
        "--worker-cmd",
        f"{PY} {FLEET / 'workflow_worker.py'}",
        "--deploy",
        f"elsewhere={V2}",
        "--deployment",
        "fleet",
        "chaos",
        "--workflow",
        "FleetMailer",
    )
    assert other.returncode == 2 and "no worker command polls elsewhere" in other.stderr, other.stderr


def _versioned_gameday(
    tmp_path: Path, tag: str, address: str, behavior: str
) -> tuple[subprocess.CompletedProcess, dict]:
    """The deploy experiment of a game day with --deployment, the workflow worker's behavior `behavior`."""
    home, out = tmp_path / "home", tmp_path / "after-action"
    flags = _fleet(home, tag, address)
    flags[flags.index(f"{tag}-wf={PY} {FLEET / 'workflow_worker.py'}")] += f" --versioning {behavior}"
    try:
        done = run_cli(
            *flags,
            "--deploy",
            f"{tag}-wf={V2} --versioning {behavior}",
            "--deployment",
            f"fleet-{tag}",
            "gameday",
            "--workflow",
            "FleetMailer",
            "--input",  # runs that outlast the ramp and version 2's time as current
            json.dumps({"count": 20, "pace": 0.5, "activity_queue": f"{tag}-acts"}),
            "--scenarios",
            "deploy",
            "--runs",
            "3",
            "--out",
            str(out),
            timeout=600,
        )
    finally:
        _stop(home)
    doc = json.loads((out / "gameday.json").read_text()) if (out / "gameday.json").is_file() else {}
    assert done.returncode == 0 and doc.get("verdict") == "PASS", done.stdout[-4000:] + done.stderr[-2000:]
    return done, doc["experiments"][0]["report"]


def test_auto_upgrade_meets_version_2_s_non_determinism_named_and_the_rollback_drains(tmp_path, temporal_address):
    done, report = _versioned_gameday(tmp_path, "au", temporal_address, "auto-upgrade")
    deploy = next(k for k in report["pauses"] if k["kind"] == "deploy")
    new = deploy["to"]
    assert new.startswith("v2-") and deploy["ramp_percent"] == 50 and "rolled_back_at" in deploy
    failures = [f for r in report["runs"] for f in r["audit"]["lost_work"]["task_failures"]]
    assert failures and all(f["cause"] == "non-determinism" and f["version"] == new for f in failures), failures
    # stuck until the rollback (version 1 current again, from the moment it was asked), then through
    assert all(f["until"] is not None and f["until"] >= deploy["rolling_back_at"] for f in failures), (failures, deploy)
    assert f"of version {new}" in done.stdout
    assert report["totals"]["runs_completed"] == 3
    ran = [r["audit"]["lost_work"]["versions"] for r in report["runs"]]
    assert all(any(k.startswith("v1-") and k.endswith("(auto-upgrade)") for k in v) for v in ran), ran


def test_pinned_workflows_stay_on_version_1_through_the_deploy(tmp_path, temporal_address):
    done, report = _versioned_gameday(tmp_path, "pn", temporal_address, "pinned")
    assert not [f for r in report["runs"] for f in r["audit"]["lost_work"]["task_failures"]]
    ran = [r["audit"]["lost_work"]["versions"] for r in report["runs"]]
    assert all(list(v) and all(k.startswith("v1-") and k.endswith("(pinned)") for k in v) for v in ran), ran
    assert report["totals"]["runs_completed"] == 3


def test_a_failed_task_s_version_is_its_worker_s_then_never_a_reused_pid_s(tmp_path: Path):
    """Which build a worker ran comes from its `version` event before the failure; the same pid@host
    dying and coming back later unversioned (a pid reused, a shared ledger) is another worker."""
    from checkpoint_tui.ledger.fleet_queries import worker_versions
    from checkpoint_tui.ledger.store import connect, record_worker_event

    conn = connect(tmp_path / "ledger.db")
    record_worker_event(conn, "version", 41, "41@vm", detail=json.dumps({"build_id": "v2-aaaa"}), at=100.0)
    record_worker_event(conn, "version", 42, "42@vm", detail='{"build_id": ' * 5000, at=100.0)  # hostile: none
    assert worker_versions(conn, ["41@vm", "42@vm", "43@vm"], 150.0) == {"41@vm": "v2-aaaa"}
    assert worker_versions(conn, ["41@vm"], 99.0) == {}  # a version said after the failure did not run it
    record_worker_event(conn, "died", 41, "41@vm", at=160.0)
    assert worker_versions(conn, ["41@vm"], 170.0) == {}  # that worker is gone; a later 41@vm is not it
