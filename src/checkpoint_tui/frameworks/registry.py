"""Which agent framework ran a workflow (`detect`) and what each of its activities is (`classify`),
from history alone, over every framework module: this package's own, found by scanning it, and any
other package's, registered under the entry-point group `checkpoint_tui.frameworks` (one entry a
module, e.g. `toy = "toy_framework"`). Adding a framework is one module.

A module is taken only if it declares the interface (frameworks/base.py); one that fails to import,
or breaks it, is left out with one warning, and a classify that raises or miscounts falls back to
the generic classification (every activity "other": re-executed without a claim, it is at risk, so a
broken plugin can fail a verdict, never pass one)."""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
import re
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from itertools import islice
from types import ModuleType
from typing import cast

from checkpoint_tui.frameworks.base import LANGUAGES, NO, Framework
from checkpoint_tui.frameworks.declared import Declared
from checkpoint_tui.frameworks.units import ActivitySeen, UnitInfo, other

GROUP = "checkpoint_tui.frameworks"
DETECT_LIMIT = 10_000  # activity types looked at: a framework shows itself in its first model request
MAX_PLUGINS = 64
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}\Z")
_MEMBERS = ("recognises", "classify", "heartbeat_fix")
log = logging.getLogger(__name__)

# What classifies a workflow's activities: a framework's name (forced, or detected), or a declaration.
Classifier = str | Declared | None


@functools.cache
def frameworks() -> tuple[Framework, ...]:
    """Every framework module, by name; ours first where a plugin takes a name of ours."""
    found: dict[str, Framework] = {}
    for where, load in [*_ours(), *_plugins()]:
        try:
            module = load()
        except Exception as err:  # someone else's package: anything may fail as it imports
            log.warning("checkpoint-tui: framework %s left out: it failed to import (%s)", where, type(err).__name__)
            continue
        problem = _problem(module)
        framework = cast(Framework, module)  # when _problem found none
        if problem is None and found.get(framework.NAME, module) is not module:
            problem = f"the name {framework.NAME!r} is taken"
        if problem is not None:
            if where.startswith("entry point"):  # our own helper modules are not frameworks: no word
                log.warning("checkpoint-tui: framework %s left out: %s", where, problem)
            continue
        found.setdefault(framework.NAME, framework)
    return tuple(found.values())


def names() -> tuple[str, ...]:
    return tuple(f.NAME for f in frameworks())


def get(name: str | None) -> Framework | None:
    return next((f for f in frameworks() if name == f.NAME), None)


def detect(activities: Iterable[ActivitySeen | str]) -> str | None:
    """The framework of the first activity one framework recognises more surely than any other, or None
    (a plain workflow). A bare type is an activity whose payloads did not decode."""
    every = frameworks()
    for item in islice(activities, DETECT_LIMIT):
        seen = ActivitySeen(item, [], None, None) if isinstance(item, str) else item
        kind = getattr(seen, "activity_type", None)
        if not isinstance(seen, ActivitySeen) or not isinstance(kind, str) or len(kind) > 1000:
            continue
        words = sorted(((_recognises(f, seen), f.NAME) for f in every), reverse=True)
        if words and words[0][0] > NO and (len(words) == 1 or words[1][0] < words[0][0]):
            return words[0][1]
    return None


def overridden(framework: Classifier, seen: list[ActivitySeen]) -> str | None:
    """The framework to use instead of a forced one (--framework) that recognises none of the run's
    activities while another framework recognises them (a pydantic-ai agent run with --framework
    openai-agents: its model requests would be judged as tools, at risk); None to keep it."""
    if not isinstance(framework, str):
        return None
    forced, found = get(framework), detect(seen)
    if forced is None or found is None or found == framework:
        return None
    if any(_recognises(forced, s) > NO for s in islice(seen, DETECT_LIMIT)):
        return None  # it names some of them: a mixed workflow, the user's word stands
    return found


def classify(framework: Classifier, seen: list[ActivitySeen]) -> list[UnitInfo]:
    """One unit per activity, in order. A declaration classifies by its globs; an unknown or None
    framework generically: every activity "other", labelled by its type."""
    seen = list(seen)
    if isinstance(framework, Declared):
        return framework.classify(seen)
    module = get(framework)
    if module is not None:
        try:
            units = module.classify(seen)
            if len(units) == len(seen) and all(isinstance(u, UnitInfo) for u in units):
                return units
            _warn_once(module.NAME, f"gave {len(units)} units for {len(seen)} activities")
        except Exception as err:  # a plugin's bug: the generic classification, which fails rather than passes
            _warn_once(module.NAME, f"failed to classify ({type(err).__name__})")
    return [other(s) for s in seen]


def _recognises(framework: Framework, seen: ActivitySeen) -> int:
    try:
        word = framework.recognises(seen)
    except Exception:  # a plugin's bug: it recognises nothing
        return NO
    return word if isinstance(word, int) and not isinstance(word, bool) else int(word is True)


def _ours() -> list[tuple[str, Callable[[], object]]]:
    package = importlib.import_module(__package__ or "checkpoint_tui.frameworks")
    return [
        (f"module {info.name}", functools.partial(importlib.import_module, f"{package.__name__}.{info.name}"))
        for info in pkgutil.iter_modules(package.__path__)
        if not info.ispkg
    ]


def _plugins() -> list[tuple[str, Callable[[], object]]]:
    return [(f"entry point {ep.name} ({ep.value})", ep.load) for ep in list(entry_points(group=GROUP))[:MAX_PLUGINS]]


def _problem(module: object) -> str | None:
    """What keeps a module from being a framework (frameworks/base.py), or None."""
    if not isinstance(module, ModuleType):
        return "not a module"
    name, language = getattr(module, "NAME", None), getattr(module, "LANGUAGE", None)
    if not isinstance(name, str) or not _NAME.match(name):
        return "no NAME of lower-case letters, digits and '-'"
    if language not in LANGUAGES:
        return f"LANGUAGE is not one of {', '.join(LANGUAGES)}"
    missing = [m for m in _MEMBERS if not callable(getattr(module, m, None))]
    return f"no {', '.join(missing)}" if missing else None


_warned: set[str] = set()


def _warn_once(framework: str, what: str) -> None:
    """One warning a framework a process: classification runs on every poll of a live run (the app's
    screen would fill with the same line)."""
    if framework not in _warned:
        _warned.add(framework)
        log.warning('checkpoint-tui: framework %s %s; its activities are classed "other"', framework, what)
