"""What a user's project declares about its workflow, from the flags or else from its project file where
the worker command runs: the [tool.checkpoint-tui] table of ./pyproject.toml, else the "checkpoint-tui"
object of ./package.json (a node project's): where its effects land (--effects, `effects`) and which
activities are model requests or tool calls (--model-activities, --tool-activities). Each is checked
before anything starts (exit 2)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from checkpoint_tui.errors import UsageError

if TYPE_CHECKING:
    from checkpoint_tui.frameworks.declared import Declared
    from checkpoint_tui.ledger.destination import Destination

PYPROJECT_LIMIT = 1024 * 1024  # a project file (pyproject.toml, package.json), read for the lab's table


def destinations(args: argparse.Namespace) -> tuple[Destination, ...]:
    """Where the effects land: --effects, else `effects` in [tool.checkpoint-tui] of ./pyproject.toml."""
    from checkpoint_tui.ledger.destination import MAX_DESTINATIONS, parse_destination

    given = list(getattr(args, "effects", None) or [])
    if not given:
        table, where = _project_table(Path.cwd())
        specs = table.get("effects", [])
        specs = [specs] if isinstance(specs, str) else specs
        if not isinstance(specs, list) or not all(isinstance(x, str) for x in specs):
            raise UsageError(f"{where} effects is a list of sql:... or file:... specs")
        given = [parse_destination(x) for x in specs[: MAX_DESTINATIONS + 1]]
    deps = {name for name, _ in getattr(args, "dependency", None) or []}
    if (http := next((d for d in given if d.kind == "http" and d.target not in deps), None)) is not None:
        raise UsageError(
            f"--effects {http.label}: give --dependency {http.target}=HOST:PORT too (chaos logs what "
            "its proxy forwards)"
        )
    if len(given) > MAX_DESTINATIONS:
        raise UsageError(f"at most {MAX_DESTINATIONS} --effects destinations")
    if len({(d.kind, d.target, d.query, d.pattern) for d in given}) < len(given):
        raise UsageError("the same --effects destination twice")
    return tuple(given)


def declaration(args: argparse.Namespace) -> Declared | None:
    """What the user declared the activities to be: the flags, else [tool.checkpoint-tui] of the
    pyproject.toml where the worker command runs (the current directory), else nothing."""
    from checkpoint_tui.frameworks.declared import MAX_GLOBS, Declared, check_glob

    model, tool = args.model_activities or [], args.tool_activities or []
    where = "--model-activities/--tool-activities"
    if not model and not tool:
        model, tool, where = _project_declaration(Path.cwd())
    if len(model) > MAX_GLOBS or len(tool) > MAX_GLOBS:
        raise UsageError(f"at most {MAX_GLOBS} globs each of --model-activities and --tool-activities")
    try:
        found = Declared(tuple(check_glob(g) for g in model), tuple(check_glob(g) for g in tool))
    except ValueError as err:
        raise UsageError(f"{where}: {err}") from None
    return found or None


def _project_table(folder: Path) -> tuple[dict, str]:
    """The lab's table of the project in `folder` and where it is said: [tool.checkpoint-tui] of its
    pyproject.toml, else the "checkpoint-tui" object of its package.json ({} when neither has one)."""
    ours = _pyproject_table(folder / "pyproject.toml")
    if ours:
        return ours, "pyproject.toml [tool.checkpoint-tui]"
    return _package_json_table(folder / "package.json"), 'package.json "checkpoint-tui"'


def _pyproject_table(path: Path) -> dict:
    """[tool.checkpoint-tui] of the project's pyproject.toml ({} when there is none)."""
    import tomllib

    from checkpoint_tui.files import read_input

    if not path.is_file():
        return {}
    try:
        table = tomllib.loads(read_input(path, "pyproject.toml", PYPROJECT_LIMIT).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"{path}: not TOML ({str(err)[:120]})") from None
    ours = table.get("tool", {}).get("checkpoint-tui", {})
    if not isinstance(ours, dict):
        raise UsageError(f"{path}: [tool.checkpoint-tui] is not a table")
    return ours


def _package_json_table(path: Path) -> dict:
    """The "checkpoint-tui" object of a node project's package.json ({} when there is none): bounded,
    nested at most as deep as any JSON the lab reads, no link followed past what the user named."""
    from checkpoint_tui.files.inputs import read_json_file

    if not path.is_file():
        return {}
    doc = read_json_file(path, "package.json", PYPROJECT_LIMIT)
    ours = doc.get("checkpoint-tui", {}) if isinstance(doc, dict) else {}
    if not isinstance(ours, dict):
        raise UsageError(f'{path}: "checkpoint-tui" is not an object')
    return ours


def _project_declaration(folder: Path) -> tuple[list, list, str]:
    ours, where = _project_table(folder)
    model, tool = ours.get("model-activities", []), ours.get("tool-activities", [])
    model, tool = ([x] if isinstance(x, str) else x for x in (model, tool))
    if not isinstance(model, list) or not isinstance(tool, list):
        raise UsageError(
            f"{folder / where.split()[0]}: {where} model-activities and tool-activities are lists of globs"
        )
    return model, tool, where
