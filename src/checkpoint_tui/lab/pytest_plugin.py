"""The lab in a team's own pytest (entry point `pytest11`: installing checkpoint-tui is enough).

    import pytest
    from checkpoint_tui.lab import assert_passed

    @pytest.mark.chaos(seeds=range(1, 6))
    def test_the_mailer_sends_each_email_once(chaos_lab):
        result = chaos_lab.chaos(worker_cmd="python worker.py", workflow="MailerGuarded",
                                 input={"turns": 6}, aim="tool", kills=4)
        assert_passed(result)  # the failure message: the audit's verdict, naming tool and call

Nothing starts unless a test asks for `chaos_lab`. Its lab lives on a home under pytest's temporary
directory: one per session by default (one dev server, reused by every test of a pytest-xdist
worker: each worker has its own), or one per test with `chaos_lab_scope = function` in the ini file.
`@pytest.mark.chaos(seeds=...)` runs the test once per seed (ids `seed1`, ...); its other keywords are
defaults for `chaos_lab.chaos(...)`; a user's workflow with no seed and no schedule words (kills, steps,
...) is killed once per tool in every crash point's window (`every_window`). Each result's verdict and
report path go into the test's properties (`--junitxml` carries them). Worker commands run from
pytest's rootdir; a bare `python` is pytest's own interpreter.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from checkpoint_tui.lab.api import Lab, check_timeout
from checkpoint_tui.lab.result import LabError, Result

Scope = Literal["session", "package", "module", "class", "function"]
SCOPES: tuple[Scope, ...] = ("session", "package", "module", "class", "function")
MAX_SEEDS = 1000


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "chaos_lab_scope",
        f"scope of the chaos_lab fixture's lab and home: {', '.join(SCOPES)} "
        "(default session: one dev server per session and pytest-xdist worker)",
        default="session",
    )
    parser.addini("chaos_lab_timeout", "seconds one chaos, verify or doctor may take (default 900)", default="900")


def pytest_configure(config: pytest.Config) -> None:
    # checked here, once: pytest evaluates a fixture's scope callable for every run, with or without
    # the fixture, and would wrap an error there in a TypeError about the callable's signature
    scope = str(config.getini("chaos_lab_scope")).strip()
    if scope not in SCOPES:
        raise pytest.UsageError(f"chaos_lab_scope = {scope[:40]!r}: one of {', '.join(SCOPES)}")
    try:
        check_timeout(config.getini("chaos_lab_timeout"))
    except LabError as err:
        raise pytest.UsageError(f"chaos_lab_timeout: {err}") from None
    config.addinivalue_line(
        "markers",
        "chaos(seeds=None, **words): run the test once per seed in `seeds`; the other words are "
        "defaults of chaos_lab.chaos() (checkpoint-tui)",
    )


def _scope(fixture_name: str, config: pytest.Config) -> Scope:
    scope = str(config.getini("chaos_lab_scope")).strip()
    return scope if scope in SCOPES else "session"  # pytest_configure refused any other


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    given = _words(metafunc.definition).get("seeds")
    if given is None or "chaos_seed" not in metafunc.fixturenames:
        return
    seeds = list(itertools.islice(given, MAX_SEEDS + 1)) if isinstance(given, Iterable) else []
    if not seeds or len(seeds) > MAX_SEEDS or not all(type(s) is int and 0 <= s < 2**63 for s in seeds):
        raise pytest.UsageError(f"{metafunc.definition.nodeid}: chaos(seeds=...) takes 1..{MAX_SEEDS} seeds >= 0")
    metafunc.parametrize("chaos_seed", seeds, ids=[f"seed{s}" for s in seeds])


@pytest.fixture(scope=_scope)
def chaos_lab_session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """The Lab behind chaos_lab: its home, its dev server; stopped when its scope ends."""
    timeout = check_timeout(request.config.getini("chaos_lab_timeout"))  # checked at configure
    lab = Lab(tmp_path_factory.mktemp("chaos-lab"), cwd=request.config.rootpath, timeout_s=timeout)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture
def chaos_seed(request: pytest.FixtureRequest) -> int | None:
    """This test's seed from @pytest.mark.chaos(seeds=...), else None."""
    return getattr(request, "param", None)


@pytest.fixture
def chaos_lab(request: pytest.FixtureRequest, chaos_lab_session: Lab, chaos_seed: int | None) -> ChaosLab:
    """The lab for this test: chaos(), verify() and doctor() with the marker's seed and defaults."""
    defaults = {k: v for k, v in _words(request.node).items() if k != "seeds"}
    return ChaosLab(chaos_lab_session, request.node, chaos_seed, defaults)


def _words(node: pytest.Item) -> dict[str, Any]:
    """Every `chaos` mark's words on the test, its class and module: the closest one's win."""
    words: dict[str, Any] = {}
    for marker in reversed(list(node.iter_markers("chaos"))):  # iter_markers: closest first
        words.update(marker.kwargs)
    return words


SEEDED = (
    *("kills", "steps", "pauses", "partitions", "resets", "runs", "model_faults"),
    *("schedule", "until_covered", "seed", "args"),
)


def chaos_words(defaults: dict[str, Any], words: dict[str, Any], seed: int | None) -> dict[str, Any]:
    """The words of a test's chaos: the marker's defaults, then its own. A user's workflow with neither a
    seed (the marker's seeds=) nor a schedule's words is killed in every crash point's window, each tool
    once (`every_window`): the fixture's default proof. Else a seeded schedule (seed 1 without seeds=)."""
    words = {**defaults, **words}
    if words.get("workflow") and seed is None and not any(k in words for k in SEEDED) and "every_window" not in words:
        words["every_window"] = True
        return words
    words.setdefault("seed", seed if seed is not None else 1)
    return words


class ChaosLab:
    """A test's view of the lab: its seed and the marker's words filled in, each result recorded in
    the test's properties."""

    def __init__(self, lab: Lab, node: pytest.Item, seed: int | None, defaults: dict[str, Any]) -> None:
        self.lab, self.node, self.seed, self.defaults = lab, node, seed, defaults

    @property
    def home(self) -> Path:
        return self.lab.home

    def chaos(self, **words: Any) -> Result:
        """`checkpoint-tui chaos` with these words (worker_cmd, workflow, input, aim, seed, kills, ...)."""
        return self._record(self.lab.chaos(**chaos_words(self.defaults, words, self.seed)))

    def verify(self, **words: Any) -> Result:
        return self._record(self.lab.verify(**words))

    def doctor(self, **words: Any) -> Result:
        return self._record(self.lab.doctor(**words))

    def _record(self, result: Result) -> Result:
        self.node.user_properties.append((f"checkpoint_{result.command}", result.verdict))
        self.node.user_properties.append((f"checkpoint_{result.command}_report", os.fspath(result.report_path)))
        return result
