"""The pytest plugin (checkpoint_tui.lab.pytest_plugin, loaded through its pytest11 entry point), run as a
user's project runs it: a generated test module of at most 15 lines in pytester's own directory, in
a pytest subprocess. The guarded agent passes over seeds 1-5 on two pytest-xdist workers (each its
own home and dev server) and leaves no process behind; the blind one fails naming the tool and the
call id, in pytest's failure message and in the JUnit XML."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from checkpoint_tui.waiting import wait_until_sync

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _homes_stopped(pytester: pytest.Pytester) -> Iterator[None]:
    """Whatever a failing test leaves (an inner run's lab homes under pytester's folder) is stopped."""
    yield
    for record in pytester.path.rglob("chaos-lab*/run/devserver.json"):
        home = record.parent.parent
        subprocess.run(
            [sys.executable, "-m", "checkpoint_tui", "--home", str(home), "stop"],
            capture_output=True,
            timeout=120,
            check=False,
        )


ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "pytest.md"


def _docs_test() -> str:
    """The pydantic-ai test docs/pytest.md shows a team (its worker path made absolute: pytester runs
    in a temp dir): what is tested here is what the page says."""
    text = DOCS.read_text()
    block = text[text.index("```python", text.index("pydantic-ai:")) + len("```python\n") :]
    return block[: block.index("```")].replace("python examples/", f"python {ROOT}/examples/")


# Plugins this venv has for other packages' sake (langsmith's and anyio's pytest11 entry points, there
# for the agent frameworks) and the generated project does not use: not loaded, 0.75 s of CPU a run.
UNUSED_PLUGINS = ("-p", "no:langsmith_plugin", "-p", "no:anyio")


def _runpytest(pytester: pytest.Pytester, *args: str, timeout: float) -> pytest.RunResult:
    """pytest in a subprocess on pytester's folder, as the project's own run (plugins by entry point)."""
    return pytester.runpytest_subprocess(*UNUSED_PLUGINS, *args, timeout=timeout)


def _module(pytester: pytest.Pytester, workflow: str, seeds: str) -> Path:
    source = _docs_test()
    assert len(source.splitlines()) <= 15 and 'workflow="PydanticMailerGuarded"' in source
    source = source.replace('"PydanticMailerGuarded"', f'"{workflow}"').replace("range(1, 6)", seeds)
    return pytester.makepyfile(test_mailer=source)


def _ours(root: Path) -> list[str]:
    """Processes whose command line or CHECKPOINT_HOME is under `root` (what the run started)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            home = proc.environ().get("CHECKPOINT_HOME", "") if proc.pid != os.getpid() else ""
            line = " ".join(proc.info["cmdline"] or [])
            if (str(root) in line or home.startswith(str(root))) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"{proc.pid}: {line[:160]}")
        except psutil.Error:
            continue
    return found


def test_a_guarded_agent_passes_over_seeds_1_to_5_on_two_xdist_workers_and_leaves_nothing(pytester: pytest.Pytester):
    _module(pytester, "PydanticMailerGuarded", "range(1, 6)")
    result = _runpytest(pytester, "-n", "2", "-p", "xdist", "-v", timeout=600)
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(["*PASSED*test_mailer_sends_each_email_once?seed1?*"])
    homes = {p.resolve().parent for p in pytester.path.rglob("chaos-lab*/lab")}
    assert len(homes) == 2  # one home (one dev server) per xdist worker
    assert wait_until_sync(lambda: not _ours(pytester.path), 30, every=0.1)  # a scan of every process


def test_a_blind_agent_fails_naming_the_tool_and_the_call(pytester: pytest.Pytester):
    _module(pytester, "PydanticMailer", "[3]")
    junit = pytester.path / "junit.xml"
    result = _runpytest(pytester, f"--junitxml={junit}", timeout=300)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: chaos seed 3: FAIL: run completed*NOT exactly once*"
            "re-executed at risk: send_email call pyd_ai_*"
        ]
    )
    xml = junit.read_text()
    assert "send_email call pyd_ai_" in xml and 'name="checkpoint_chaos"' in xml  # the verdict, a property too
    assert wait_until_sync(lambda: not _ours(pytester.path), 30, every=0.1)  # a scan of every process


def test_a_scope_that_is_not_one_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nchaos_lab_scope = forever\n")
    pytester.makepyfile(test_x="def test_x(chaos_lab):\n    pass\n")
    result = _runpytest(pytester, timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*chaos_lab_scope = 'forever': one of session, package, module, class, function*"])
    assert "TypeError" not in result.stdout.str() + result.stderr.str()


def test_a_timeout_that_is_not_one_is_a_usage_error(pytester: pytest.Pytester):
    pytester.makeini("[pytest]\nchaos_lab_timeout = soon\n")
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = _runpytest(pytester, timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*chaos_lab_timeout: timeout must be a number of seconds*'soon'*"])


@pytest.mark.parametrize("seeds", ["[]", "[-1]", "['one']"])
def test_bad_seeds_are_a_usage_error(pytester: pytest.Pytester, seeds: str):
    pytester.makepyfile(test_x=f"import pytest\n@pytest.mark.chaos(seeds={seeds})\ndef test_x(chaos_lab):\n    pass\n")
    result = _runpytest(pytester, timeout=120)
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*chaos(seeds=...) takes 1..1000 seeds >= 0*"])


def test_a_test_without_the_fixture_starts_nothing(pytester: pytest.Pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = _runpytest(pytester, timeout=120)
    result.assert_outcomes(passed=1)
    assert not list(pytester.path.rglob("chaos-lab*"))


def test_every_test_on_the_page_collects_once_per_seed(pytester: pytest.Pytester):
    text = DOCS.read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    tests = [b for b in blocks if "def test_" in b]
    assert len(tests) == 3
    pytester.makepyfile(**{f"test_page_{i}": b for i, b in enumerate(tests)})
    result = _runpytest(pytester, "--collect-only", "-q", timeout=120)
    result.stdout.fnmatch_lines(["*30 tests collected*"])  # 5 seeds; 5 seeds; 4 agents x 5 seeds
    result.stdout.fnmatch_lines(["*test_each_mailer_sends_each_email_once?seed5-google_adk_mailer-*"])


@pytest.mark.parametrize(("scope", "homes"), [("session", 1), ("function", 3)])
def test_the_lab_s_scope_is_the_user_s_choice(pytester: pytest.Pytester, scope: str, homes: int):
    pytester.makeini(f"[pytest]\nchaos_lab_scope = {scope}\n")
    pytester.makepyfile(
        test_x="""
import pytest

@pytest.mark.chaos(seeds=[1, 2, 3])
def test_x(chaos_lab, chaos_seed):
    assert chaos_lab.seed == chaos_seed
    (chaos_lab.home / f"seen-{chaos_seed}").write_text("")
"""
    )
    result = _runpytest(pytester, timeout=120)
    result.assert_outcomes(passed=3)
    assert len({p.parent for p in pytester.path.rglob("seen-*")}) == homes  # nothing started: no command ran


def test_a_class_s_seeds_and_a_method_s_words_are_merged_the_closest_winning(pytester: pytest.Pytester):
    pytester.makepyfile(
        test_x="""
import pytest

@pytest.mark.chaos(seeds=[4, 5], kills=3, aim="tool")
class TestMailer:
    @pytest.mark.chaos(kills=5)
    def test_x(self, chaos_lab, chaos_seed):
        assert chaos_lab.seed == chaos_seed in (4, 5)
        assert chaos_lab.defaults == {"kills": 5, "aim": "tool"}
"""
    )
    result = _runpytest(pytester, "-v", timeout=120)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_x?seed4?*PASSED*", "*test_x?seed5?*PASSED*"])
