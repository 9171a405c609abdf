"""mkdocs hook: the command reference page (`reference.md`), generated from the real argparse parser
each time the site is built, so it cannot drift from the flags `checkpoint-tui` accepts. No plugin
needed beyond mkdocs itself (`hooks:` in mkdocs.yml); tests/test_docs.py renders it too."""

from __future__ import annotations

import argparse
import functools
import re
from typing import Any

PAGE = "reference.md"
WIDTH = 100  # usage lines wrapped at a fixed width, not the builder's terminal's


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(parser.prog, width=WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    keep = parser.formatter_class
    parser.formatter_class = functools.partial(argparse.HelpFormatter, width=WIDTH)
    try:
        return parser.format_usage().strip()
    finally:
        parser.formatter_class = keep


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# "default: cwd", "default 30": the value runs to the next ; , or ) (a help text says it so).
_PROSE_DEFAULT = re.compile(r"\bdefault:? (?P<value>[^;,()]+)")


def split_default(help_text: str) -> tuple[str, str | None]:
    """A help text's own "default ..." phrase, taken out of it for the default column: many flags
    default to something only known at run time (an environment variable, the home), so the parser's
    default is None and the help says what happens. Returns (help without it, the value or None)."""
    found = _PROSE_DEFAULT.search(help_text)
    if not found:
        return help_text, None
    before, after = help_text[: found.start()], help_text[found.end() :]
    if before.endswith("(") and after.startswith(")"):  # "... (default 30)"
        before, after = before[:-1].rstrip(), after[1:]
    elif before.endswith("(") and after[:2] in ("; ", ", "):  # "(default 0.5; 1.0 costs less CPU)"
        after = after[2:]
    elif before.endswith(("; ", ", ")):  # "(env X; default: cwd)", "...); default: the offline provider"
        before = before[:-2]
    else:  # "default" inside a sentence: leave the text alone
        return help_text, None
    return (before + after).strip(), found["value"].strip()


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    from checkpoint_tui.cli.parser import has_default

    rows = []
    formatter = _formatter(parser)
    for action in parser._actions:  # argparse keeps no public list of a parser's arguments
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if action.nargs != 0:
                metavar = action.metavar or action.dest.upper()
                name += f" {metavar}"
        else:
            name = action.metavar or action.dest
        help_text, said = split_default(formatter._expand_help(action) if action.help else "")
        if action.choices and not isinstance(action.choices, dict):
            help_text += f" (one of: {', '.join(map(str, action.choices))})"
        shown = f"`{action.default}`" if has_default(action) else _cell(said or "")
        rows.append(f"| `{_cell(name)}` | {shown} | {_cell(help_text)} |")
    return rows


def _section(title: str, parser: argparse.ArgumentParser, summary: str = "") -> list[str]:
    out = [f"## {title}", ""]
    if summary:
        out += [summary[0].upper() + summary[1:] + ".", ""]
    out += ["```text", _usage(parser), "```", ""]
    rows = _flag_rows(parser)
    if rows:
        out += ["| argument | default | what |", "|---|---|---|", *rows, ""]
    return out


def render_reference(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole page: the top-level flags, then one section per subcommand, then the exit codes."""
    from checkpoint_tui.errors import Exit

    if parser is None:
        from checkpoint_tui.cli.parser import build_parser

        parser = build_parser()
    out = [
        "# Command reference",
        "",
        "Generated from `checkpoint_tui.cli.parser.build_parser()` when this site is built: these are",
        "the flags the installed `checkpoint-tui` accepts. What the commands do, with examples, is in",
        "[Commands](commands.md). Every flag is checked before anything starts; a bad one is one line",
        "on stderr and exit 2. In the default column, `1` in code is the parser's own default; words",
        "(cwd) say what happens when neither the flag nor its environment variable is given.",
        "",
    ]
    out += _section("checkpoint-tui", parser, "the app by default; the global flags go before the command")
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in subs._choices_actions}
    for name, sub in subs.choices.items():
        out += _section(f"checkpoint-tui {name}", sub, helps.get(name, ""))
    out += ["## Exit codes", "", "| code | meaning |", "|---|---|"]
    meaning = {
        Exit.OK: "the command did what it was asked; every check passed",
        Exit.FAILED: "a run or a check failed",
        Exit.USAGE: "a bad flag or argument, found before anything started",
        Exit.UNAVAILABLE: "Temporal, the ledger, a binary or a server cannot be reached",
    }
    out += [f"| {int(code)} (`{code.name}`) | {meaning.get(code, '')} |" for code in Exit]
    return "\n".join(out) + "\n"


def on_files(files: Any, config: Any) -> Any:
    """Add the generated page to the site (mkdocs 1.6's File.generated), before the nav is built."""
    from mkdocs.structure.files import File

    if files.get_file_from_path(PAGE) is not None:
        raise RuntimeError(f"docs/{PAGE} is generated by docs_hooks/cli_reference.py: do not write it by hand")
    files.append(File.generated(config, PAGE, content=render_reference()))
    return files
