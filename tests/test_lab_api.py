"""checkpoint_tui.lab, the Python API: chaos on a user's agent through the CLI's own engine on both
ledger backends, the result read from the report; a usage error raised with the CLI's line before
anything starts; a timeout ending the command and everything it started; a closed lab refusing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from checkpoint_tui.lab import Lab, LabError, Result, assert_passed
from checkpoint_tui.ledger import queries
from checkpoint_tui.ledger.store import close_all, connect
from checkpoint_tui.waiting import wait_until_sync

WORKER = Path(__file__).resolve().parents[1] / "examples" / "agents" / "pydantic_ai_mailer" / "worker.py"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _homes_stopped(tmp_path: Path) -> Iterator[None]:
    """Whatever a failing test leaves in its homes is stopped (the session's leftover check is the net)."""
    yield
    for record in tmp_path.rglob("run/devserver.json"):
        subprocess.run(
            [sys.executable, "-m", "checkpoint_tui", "--home", str(record.parent.parent), "stop"],
            capture_output=True,
            timeout=120,
            check=False,
        )


# A scan of every process (command line and environment) costs 5-20 ms of CPU: polled at the default
# 5 ms it would keep a core busy while the lab it waits for needs it.
SCAN_EVERY_S = 0.1


def _running_in(home: Path) -> list[int]:
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            env_home = proc.environ().get("CHECKPOINT_HOME", "") if proc.pid != os.getpid() else ""
            if (
                str(home) in " ".join(proc.info["cmdline"] or []) or env_home == str(home)
            ) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_chaos_on_a_guarded_agent_passes_and_says_what_it_re_executed(
    tmp_path: Path, backend: str, temporal_address: str, request: pytest.FixtureRequest
):
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else None
    home = tmp_path / "home"
    with Lab(home, temporal_address=temporal_address, ledger_url=url, cwd=ROOT) as lab:
        result = lab.chaos(
            worker_cmd=f"python {WORKER}",
            workflow="PydanticMailerGuarded",
            input={"turns": 6},
            aim="tool",
            seed=3,
            kills=4,
        )
    assert_passed(result)
    assert isinstance(result, Result) and result.passed and result.exit_code == 0
    assert str(result).startswith("chaos seed 3: PASS: run completed") and "nothing at risk" in str(result)
    assert not result.at_risk and result.duplicated == 0 and result.lost_work == 0
    assert result.kills and isinstance(result.windows, dict)  # what fired (and where worker kills landed)
    # what a kill re-executed (a loaded machine can land every kill between tool calls): each guarded
    assert all(g["tool"] == "send_email" and g["call_id"] for g in result.guarded) and not result.at_risk
    assert result.report_path.is_file() and result.junit_path is not None and result.junit_path.is_file()
    run_id = result.report["run_id"]
    ledger = url if url is not None else str(home / "run" / "checkpoint.db")
    try:  # the effects are in the backend the lab was given
        assert len(queries.effects(connect(ledger), run_id)) >= 5
    finally:
        close_all()
    assert wait_until_sync(lambda: not _running_in(home), 30, every=SCAN_EVERY_S)


def test_a_ledger_url_goes_through_the_environment_not_the_command_line(tmp_path: Path):
    lab = Lab(tmp_path / "home", ledger_url="postgresql://u:secret@127.0.0.1:1/db")
    front = lab._front(f"python {WORKER}", None, [("mail", "python3 w.py")])
    assert not any("secret" in word for word in front)
    assert lab.env["CHECKPOINT_LEDGER_URL"].endswith("@127.0.0.1:1/db")
    assert front[front.index("--worker-cmd") + 1].split()[0] == lab.python  # a bare python: this interpreter
    assert front[-1].startswith(f"mail={lab.python} ")


def test_a_usage_error_is_raised_with_the_cli_s_line_and_starts_nothing(tmp_path: Path):
    home = tmp_path / "home"
    with Lab(home, temporal_address="127.0.0.1:1", cwd=ROOT) as lab:
        with pytest.raises(LabError) as err:
            lab.chaos(worker_cmd=f"python {WORKER}", workflow="PydanticMailerGuarded", kills=1)
        assert lab._started == [False]  # refused before it started anything: close() stops nothing
    # on a server the lab did not start, the seeded schedule leaves its dev-server kill out
    why = "--kills must be at least 3 (inside an activity, the supervisor, the dev server, left out here)"
    assert err.value.exit_code == 2 and why in str(err.value)
    assert not (home / "run" / "devserver.json").exists()


@pytest.mark.parametrize(
    ("words", "why"),
    [
        ({"args": ["--json", "/tmp/x.json"]}, "the Lab chooses where its reports go"),
        ({"args": ["--save-schedule=/tmp/s.json"]}, "the Lab chooses where its reports go"),
        ({"args": ["--js", "/tmp/x.json"]}, "--js: the Lab chooses"),  # argparse takes an abbreviation
        ({"global_args": ["--hom", "/tmp/elsewhere"]}, "--hom: the Lab chooses"),
        ({"global_args": "--no-spare"}, "lists of words, not one string"),
    ],
)
def test_flags_that_would_move_or_skip_the_report_are_refused(tmp_path: Path, words: dict, why: str):
    with Lab(tmp_path / "home") as lab, pytest.raises(LabError, match=why) as err:
        lab.chaos(workflow="W", **words)
    assert err.value.exit_code == 2 and not (tmp_path / "home" / "run").exists()


def test_a_home_that_cannot_be_one_or_a_planted_link_for_its_reports_is_refused(tmp_path: Path):
    (tmp_path / "file").write_text("")
    with pytest.raises(LabError, match="not a folder") as err:
        Lab(tmp_path / "file")
    assert err.value.exit_code == 2
    for bad in (float("nan"), float("inf"), -1, 0, True, "soon"):
        with pytest.raises(LabError, match="timeout must be a number of seconds"):
            Lab(tmp_path / "home", timeout_s=bad)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "lab").symlink_to(elsewhere)
    with Lab(tmp_path / "home") as lab, pytest.raises(LabError, match="not a folder of this user's"):
        lab.verify()
    assert not list(elsewhere.iterdir())


INTERRUPTED = """
import signal
import sys
from checkpoint_tui.lab import Lab
# Ctrl-C as a terminal delivers it: a suite started in the background (`make test &`) hands its
# children SIGINT ignored, and Python then installs no KeyboardInterrupt for it
signal.signal(signal.SIGINT, signal.default_int_handler)
lab = Lab(sys.argv[1], cwd=sys.argv[2])
lab.chaos(worker_cmd="python " + sys.argv[3], workflow="PydanticMailerGuarded", input={"turns": 40}, kills=3)
"""


@pytest.mark.parametrize("when", ["starting", "running"])
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_ctrl_c_or_a_kill_of_the_caller_ends_the_command_and_everything_it_started(tmp_path: Path, how: str, when: str):
    """Ctrl-C: KeyboardInterrupt inside lab.chaos(), which ends the command and stops the home. A
    SIGKILLed caller closes nothing: the kernel SIGTERMs the command (lab/bound.py), which stops what
    it started and then, orphaned, the home's dev server."""
    import signal

    home = tmp_path / "home"
    script = tmp_path / "run_lab.py"
    script.write_text(INTERRUPTED)
    caller = subprocess.Popen(
        [sys.executable, str(script), str(home), str(ROOT), str(WORKER)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # starting: the dev server just recorded; running: the pool and its preloaded spare are up
        marker = home / "run" / ("devserver.json" if when == "starting" else "preloader-0.ready")
        assert wait_until_sync(lambda: marker.exists() and len(_running_in(home)) >= 3, 60, every=SCAN_EVERY_S)
        caller.send_signal(getattr(signal, how))
        _, err = caller.communicate(timeout=120)
        assert caller.returncode != 0 and (how == "SIGKILL" or b"KeyboardInterrupt" in err)
    finally:
        if caller.poll() is None:
            caller.kill()
    assert wait_until_sync(lambda: not _running_in(home), 60, every=SCAN_EVERY_S)


def test_a_timeout_ends_the_command_and_everything_it_started(tmp_path: Path, temporal_address: str):
    home = tmp_path / "home"
    lab = Lab(home, temporal_address=temporal_address, cwd=ROOT, timeout_s=6)
    with pytest.raises(LabError) as err:
        lab.chaos(worker_cmd=f"python {WORKER}", workflow="PydanticMailerGuarded", input={"turns": 40}, kills=3)
    assert "did not finish in 6 s (stopped)" in str(err.value)
    assert wait_until_sync(lambda: not _running_in(home), 30, every=SCAN_EVERY_S)
    lab.close()
    lab.close()  # twice is fine
    with pytest.raises(LabError, match="closed"):
        lab.verify()


class _Captured(Exception):
    pass


@pytest.mark.parametrize("kind", ["chaos", "verify", "doctor"])
def test_every_word_the_api_takes_is_a_flag_the_cli_parses_where_it_is_put(tmp_path: Path, kind: str, monkeypatch):
    """Without running anything: the argv each call builds parses with the CLI's own parser, each word
    landing on the option it names (a misspelled or misplaced flag would be exit 2 at run time)."""
    from checkpoint_tui.cli.parser import build_parser

    lab = Lab(tmp_path / "home", task_queue="q1", cwd=ROOT)
    seen: list[list[str]] = []

    def capture(name: str, front: list[str], words: list[str]):
        seen.append([*front, *words])
        raise _Captured

    monkeypatch.setattr(lab, "_run", capture)
    common = {
        "worker_cmd": f"python {WORKER}",
        "workflow": "PydanticMailerGuarded",
        "input": {"turns": 2},
        "framework": "pydantic-ai",
        "global_args": ["--no-spare"],
    }
    more = {
        "chaos": {
            "aim": "tool",
            "seed": 7,
            "kills": 4,
            "pauses": 1,
            "runs": 2,
            "strict_models": True,
            "model_faults": 2,
            "model_endpoints": [("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")],
            "args": ["--rate", "2"],
        },
        "verify": {},
        "doctor": {"measure": True},
    }[kind]
    with pytest.raises(_Captured):
        getattr(lab, kind)(**common, **more)
    args = build_parser().parse_args(seen[0])
    assert args.home == str(lab.home) and args.task_queue == "q1" and args.no_spare and args.framework == "pydantic-ai"
    assert args.worker_cmd == (lab.python, str(WORKER))
    if kind == "chaos":
        assert args.seed == 7 and args.kills == 4
        assert args.workflow == "PydanticMailerGuarded" and args.input_json == '{"turns": 2}' and args.aim == "tool"
        assert args.pauses == 1 and args.runs == 2 and args.strict_models and args.rate == 2
        assert args.model_faults == 2 and [tuple(e) for e in args.model_endpoint] == [
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        ], args.model_endpoint
        assert str(args.chaos_json).endswith(".json") and str(args.chaos_junit).endswith(".xml")
    elif kind == "verify":
        assert args.verify and args.verify_workflow == "PydanticMailerGuarded" and args.verify_input == '{"turns": 2}'
        assert str(args.json_path).endswith(".json") and str(args.verify_junit).endswith(".xml")
    else:
        assert args.measure and args.workflow == "PydanticMailerGuarded" and str(args.doctor_json).endswith(".json")


def test_doctor_of_a_user_s_agent_returns_its_findings(tmp_path: Path, temporal_address: str):
    home = tmp_path / "home"
    with Lab(home, temporal_address=temporal_address, cwd=ROOT) as lab:
        result = lab.doctor(worker_cmd=f"python {WORKER}", workflow="PydanticMailerGuarded", input={"turns": 2})
    assert not result.passed and result.exit_code == 1  # pydantic-ai's defaults: a kill waits out a timeout
    assert result.findings and all(f["kind"] == "kill-costs-timeout" for f in result.findings)
    assert str(result).startswith(f"doctor: {len(result.findings)} finding(s)") and "fix: " in str(result)
    assert wait_until_sync(lambda: not _running_in(home), 30, every=SCAN_EVERY_S)


def test_the_verdict_names_every_failing_run_and_coverage_round_and_survives_a_hostile_report(tmp_path: Path):
    """Pure: a report with several runs and coverage rounds says each failing one's sentence; one of
    the wrong shape (or not JSON, nested too deep, a FIFO, a link) gives a verdict or LabError, never a crash."""
    from checkpoint_tui.lab.result import chaos_verdict, read_report

    risky = {
        "ok": False,
        "verdict": "run failed — NOT exactly once (1 re-executed at risk: send_email call c9)",
        "at_risk": [{"tool": "send_email", "call_id": "c9"}],
        "duplicated": 0,
    }
    report = {
        "seed": 4,
        "audit": {"ok": True, "verdict": "lead fine"},
        "runs": [{"audit": {"ok": True, "verdict": "lead fine"}}, {"audit": risky}],
        "coverage": {"rounds": [{"audit": {**risky, "verdict": "round NOT exactly once (send_email call c7)"}}]},
        "checks": [
            {"name": "chaos: no re-executed tool call or activity at risk (r2)", "ok": False, "observed": "at risk 1"}
        ],
    }
    verdict = chaos_verdict(report, passed=False)
    assert verdict.startswith("chaos seed 4: FAIL: run failed") and "send_email call c9" in verdict
    assert "send_email call c7" in verdict and "lead fine" not in verdict
    result = Result("chaos", False, verdict, 1, report, tmp_path / "r.json")
    assert [a["call_id"] for a in result.at_risk] == ["c9", "c9"] and len(result.audits) == 3
    hostile = Result(
        "chaos",
        True,
        "",
        0,
        {"audit": "x", "runs": 3, "checks": [1, "a"], "windows": [], "coverage": {"rounds": "no"}},
        tmp_path / "r.json",
    )
    assert hostile.at_risk == [] and hostile.checks == [] and hostile.windows == {} and hostile.duplicated == 0
    assert chaos_verdict(hostile.report, True) == "chaos seed None: PASS"
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "r.json")
    (tmp_path / "r.json").write_text('{"seed": 1}')
    for bad in (deep, fifo, link, tmp_path / "missing.json"):
        with pytest.raises(LabError, match="no report at"):
            read_report(bad, 1, "some output")
    assert read_report(tmp_path / "r.json", 0, "") == {"seed": 1}
