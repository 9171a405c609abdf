"""Docs that cannot drift: every `checkpoint-tui ...` command line shown in README.md and docs/ parses
with the real parser; the README stays a front door (under 15 KB, the two commands, a picture the app
rendered); that picture is the after-kill snapshot test's own SVG; the generated command reference
names every subcommand and flag and shows every default; no history wording ("this session") in the
docs. Links and anchors
are checked by `mkdocs build --strict` in `make test`."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from checkpoint_tui.cli.parser import build_parser, has_default

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MKDOCS = ROOT / "mkdocs.yml"
README = ROOT / "README.md"
PICTURE = DOCS / "img" / "after-kill.svg"
SNAPSHOT = ROOT / "tests" / "__snapshots__" / "test_tui_sizes" / "test_after_kill_at_size[120x36].svg"
PROGRAM = "checkpoint-tui"
# Shell variables the docs use without assigning them (a CI runner's, a GitHub expression).
KNOWN_VARS = {"RUNNER_TEMP": "/tmp/runner", "PATH": "/usr/bin"}
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")"}
REDIRECTS = {">", ">>", "<", "2>", "2>&1", "&>"}


@dataclass(frozen=True)
class Shown:
    where: str  # file:line
    text: str  # the command line as shown, continuations joined


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _fenced_blocks(text: str) -> tuple[list[tuple[int, str, list[str]]], str]:
    """The fenced code blocks (first line number, info string, lines) and the prose with them blanked."""
    blocks, prose, inside, info, start, body = [], [], False, "", 0, []
    for number, line in enumerate(text.splitlines(), 1):
        fence = re.match(r"\s*(```+|~~~+)\s*(\{[^}]*\}|\S*)", line)
        if fence and not inside:
            info = fence.group(2)
            if info.startswith("{"):  # ```{.text .screen}: the language is the first class
                info = next(iter(re.findall(r"\.([\w-]+)", info)), "")
            inside, start, body = True, number + 1, []
            prose.append("")
        elif fence and inside:
            inside = False
            blocks.append((start, info, body))
            prose.append("")
        elif inside:
            body.append(line)
            prose.append("")
        else:
            prose.append(line)
    return blocks, "\n".join(prose)


def _joined(lines: list[str], start: int) -> list[tuple[int, str]]:
    """Shell lines with `\\` continuations joined, each with its first line's number."""
    out, pending, first = [], "", start
    for offset, line in enumerate(lines):
        if not pending:
            first = start + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((first, pending + line))
        pending = ""
    if pending:
        out.append((first, pending))
    return out


def _yaml_runs(node) -> list[str]:
    """Every `run:` string of a YAML document (a GitHub Actions job), folded blocks already joined."""
    if isinstance(node, dict):
        found = [node["run"]] if isinstance(node.get("run"), str) else []
        return found + [r for value in node.values() for r in _yaml_runs(value)]
    if isinstance(node, list):
        return [r for value in node for r in _yaml_runs(value)]
    return []


def _candidate_lines(path: Path) -> list[tuple[int, str]]:
    text = path.read_text()
    blocks, prose = _fenced_blocks(text)
    lines: list[tuple[int, str]] = []
    for start, info, body in blocks:
        if info in ("yaml", "yml"):
            for run in _yaml_runs(yaml.safe_load("\n".join(body))):
                lines += [(start, line) for line in run.splitlines()]
        elif info in ("python", "json", "text", "diff"):
            continue
        else:  # sh, plain blocks and transcripts: `$ ` prompts are stripped below
            lines += _joined(body, start)
    # Inline code in prose: a span may wrap over a line break.
    for match in re.finditer(r"(?<!`)`([^`]+)`(?!`)", prose):
        number = prose.count("\n", 0, match.start()) + 1
        lines.append((number, " ".join(match.group(1).split())))
    return lines


def _assign(line: str, variables: dict[str, str]) -> None:
    """`NAME=value` and `export A=1 B=2` lines: a later `$NAME` means what the docs set it to."""
    line = line.strip().removeprefix("$ ")
    if not re.match(r"(export\s+)?[A-Z_][A-Z0-9_]*=", line):
        return
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        return
    for word in words:
        name, eq, value = word.partition("=")
        if eq and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            variables[name] = _expand(value, variables)


def _expand(text: str, variables: dict[str, str]) -> str:
    """`"$NAME"` becomes the value as one quoted word, a bare `$NAME` its words, as a shell would."""
    text = re.sub(r"\$\{\{[^}]*\}\}", "1", text)  # a GitHub expression, e.g. ${{ github.run_number }}

    def value(match: re.Match) -> str:
        name = next(g for g in match.groups() if g)
        if name not in variables:
            raise KeyError(f"${name} is used but never assigned before this line")
        return shlex.quote(variables[name]) if match.group(0).startswith('"') else variables[name]

    name = r"([A-Za-z_][A-Za-z0-9_]*)"
    return re.sub(rf'"\${name}"|"\$\{{{name}\}}"|\$\{{{name}\}}|\${name}', value, text)


def _is_program(word: str) -> bool:
    return word == PROGRAM or word.endswith("/" + PROGRAM)


def _commands(line: str, variables: dict[str, str]) -> list[list[str]]:
    """The argv of each `checkpoint-tui ...` command in one shell line (after env prefixes, between
    pipes, `&&` and `;`; a `$(...)` substitution counts as one placeholder word)."""
    line = line.strip().removeprefix("$ ")
    if PROGRAM not in line:
        return []
    line = re.sub(r"\$\([^)]*\)", "SUBSTITUTED", line)
    lexer = shlex.shlex(_expand(line, variables), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = list(lexer)
    out, current = [], []
    for word in [*words, ";"]:
        if word in SEPARATORS:
            if current:
                out.append(current)
            current = []
        else:
            current.append(word)
    commands = []
    for argv in out:
        while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
            argv = argv[1:]  # CHECKPOINT_API_KEY=... checkpoint-tui ...
        if argv and _is_program(argv[0]):
            args = argv[1:]
            for i, word in enumerate(args):  # a redirect ends the arguments
                if word in REDIRECTS or word.rstrip("0123456789") in ("<", ">"):
                    args = args[:i]
                    break
            commands.append(args)
    return commands


def shown_command_lines() -> list[tuple[Shown, list[str]]]:
    found = []
    for path in doc_files():
        variables = dict(KNOWN_VARS)
        for number, line in sorted(_candidate_lines(path), key=lambda found: found[0]):
            _assign(line, variables)
            for args in _commands(line, variables):
                found.append((Shown(f"{path.relative_to(ROOT)}:{number}", line.strip()), args))
    return found


SHOWN = shown_command_lines()


@pytest.fixture
def doc_cwd(tmp_path, monkeypatch):
    """A directory like a checkout the docs' commands run from: `.venv/bin/python` and `python` resolve
    (--worker-cmd checks its program exists), and the directories `replay --from` reads exist."""
    for exe in (tmp_path / ".venv" / "bin" / "python", tmp_path / "bin" / "python"):
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("shown", "args"), SHOWN, ids=[s.where for s, _ in SHOWN])
def test_every_command_line_in_the_docs_parses(shown, args, doc_cwd, capsys):
    if "--from" in args:
        (doc_cwd / args[args.index("--from") + 1]).mkdir(parents=True, exist_ok=True)
    for i, word in enumerate(args[:-1]):
        if word == "--input":  # parsed later, by the command: here at least it must be JSON
            json.loads(args[i + 1])
    only_prints = bool({"--help", "-h", "--version"} & set(args))
    try:
        build_parser().parse_args(args)
    except SystemExit as stop:
        said = capsys.readouterr().err.strip()
        assert only_prints and stop.code == 0, f"{shown.where}: `{shown.text}` does not parse: {said}"
    else:
        assert not only_prints


def test_the_docs_show_many_command_lines_and_the_readme_some():
    """The extractor finds them (a broken one would pass the test above vacuously)."""
    wheres = [s.where for s, _ in SHOWN]
    assert len(wheres) >= 80, len(wheres)
    assert sum(w.startswith("README.md:") for w in wheres) >= 5
    assert any(w.startswith("docs/agents.md:") for w in wheres)
    commands = {next((a for a in args if not a.startswith("-")), "") for _, args in SHOWN}
    assert {"start", "status", "stop", "chaos", "replay", "doctor", "compare", "worker"} <= commands


def test_the_extractor_reads_shell_the_way_the_docs_write_it():
    variables = {"CMD": "python w.py", "H": "/tmp/h"}
    assert _commands("CHECKPOINT_API_KEY=x checkpoint-tui --home $H start --wait  # note", variables) == [
        ["--home", "/tmp/h", "start", "--wait"]
    ]
    assert _commands('$ .venv/bin/checkpoint-tui --worker-cmd "$CMD" stop | tail -1', variables) == [
        ["--worker-cmd", "python w.py", "stop"]
    ]
    assert _commands("make x && checkpoint-tui status > out.txt", variables) == [["status"]]
    assert _commands("kill -9 $(cat run/worker.pid)", variables) == []
    assert _joined(["checkpoint-tui chaos \\", "  --seed 3"], 1) == [(1, "checkpoint-tui chaos    --seed 3")]


def test_a_bad_command_line_would_fail():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chaos", "--seed", "S"])


def test_the_readme_is_a_front_door():
    data = README.read_bytes()
    assert len(data) <= 15_000, len(data)
    text = data.decode()
    assert "make run" in text and "make test" in text
    assert "](docs/img/after-kill.svg)" in text
    assert "checkpoint-tui --verify" in text and "pipx install" in text
    for link in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / link).exists(), link


def _css_rules(css: str) -> dict[str, str]:
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    return {" ".join(sel.split()): " ".join(body.split()) for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", css)}


def test_code_blocks_wrap_on_the_site_and_screens_keep_their_columns():
    """A long command line wraps at the column's edge instead of hiding behind a scrollbar; a screen
    capture or a diagram (fenced ```{.text .screen}) keeps its columns and scrolls. The rules are in
    the site's extra CSS, and the Markdown the site is built with puts `screen` where the CSS looks."""
    import markdown

    config = yaml.safe_load(MKDOCS.read_text())
    sheets = config.get("extra_css", [])
    assert sheets, "mkdocs.yml names no extra_css"
    rules = _css_rules("".join((DOCS / sheet).read_text() for sheet in sheets))
    assert "white-space: pre-wrap;" in rules.get(".md-typeset pre > code", ""), rules
    assert "white-space: pre;" in rules.get(".md-typeset .screen pre > code", ""), rules

    names, configs = [], {}
    for ext in config["markdown_extensions"]:
        name = ext if isinstance(ext, str) else next(iter(ext))
        names.append(name)
        if isinstance(ext, dict) and ext[name]:
            configs[name] = ext[name]
    html = markdown.markdown(
        "```sh\nmake run\n```\n\n```{.text .screen}\n| a |\n```\n", extensions=names, extension_configs=configs
    )
    assert re.search(r'<div class="highlight"><pre><span></span><code>make', html), html
    assert re.search(r'<div class="[^"]*\bscreen\b[^"]*"><pre>', html), html

    screens = 0
    for path in sorted(DOCS.glob("*.md")):
        blocks, _ = _fenced_blocks(path.read_text())
        for start, info, body in blocks:
            first = next((line for line in body if line.strip()), "")
            if ".screen" in path.read_text().splitlines()[start - 2]:
                screens += 1
                assert info == "text", f"{path.name}:{start}: a screen is text"
                assert not first.lstrip().startswith(("$ ", PROGRAM)), f"{path.name}:{start}: commands wrap"
    assert screens >= 1


def test_the_readme_says_where_make_run_puts_the_command():
    """`make run` installs into .venv without activating it: the README says where the command is and
    how to put it on PATH, and the path it names is the one the Makefile runs."""
    text = " ".join(README.read_text().split())
    assert "`.venv/bin/checkpoint-tui --help`" in text
    assert "source .venv/bin/activate" in text
    assert "$(VENV)/bin/checkpoint-tui" in (ROOT / "Makefile").read_text()


def _kill_line(observed: bool) -> str:
    from checkpoint_tui.ledger.rows import WorkerEvent
    from checkpoint_tui.tui.panes.worker_events import describe

    detail = {"pid": 18582, "signal": "SIGKILL", "exit_code": None, "observed": observed}
    return describe(WorkerEvent(1, 0.0, "kill", 18582, "run-x", 7, json.dumps(detail), None, None))


@pytest.mark.parametrize("path", [README, DOCS / "tour.md"], ids=["README", "tour"])
def test_the_kill_line_quoted_is_what_the_worker_events_pane_says(path):
    """The pane says `observed signal SIGKILL` only for a worker the app spawned (a parent sees its
    child's exit status); for one it adopted, `signal SIGKILL`. The docs quote both, each as shown."""
    said = {_kill_line(observed=True), _kill_line(observed=False)}
    _, prose = _fenced_blocks(path.read_text())
    quoted = [" ".join(m.split()) for m in re.findall(r"(?<!`)`([^`]+)`(?!`)", prose) if "signal SIGKILL" in m]
    assert quoted, f"{path.name} quotes no kill line"
    for phrase in quoted:
        parts = [p.strip() for p in phrase.split("…")]  # `worker … killed`: any pid
        assert any(all(p in line for p in parts) for line in said), (phrase, said)
    assert any("observed" not in q for q in quoted) and any("observed" in q for q in quoted), quoted


def test_the_picture_is_the_after_kill_snapshot():
    """docs/img/after-kill.svg is the 120x36 after-kill snapshot the app renders in
    tests/test_tui_sizes.py; when that snapshot is updated, refresh the copy with
    CHECKPOINT_UPDATE_DOCS=1."""
    if os.environ.get("CHECKPOINT_UPDATE_DOCS") == "1":
        PICTURE.write_bytes(SNAPSHOT.read_bytes())
    assert PICTURE.read_bytes() == SNAPSHOT.read_bytes(), "run with CHECKPOINT_UPDATE_DOCS=1 to refresh it"


def _reference_hook():
    sys.path.insert(0, str(ROOT / "docs_hooks"))
    try:
        import cli_reference
    finally:
        sys.path.remove(str(ROOT / "docs_hooks"))
    return cli_reference


def test_the_command_reference_names_every_subcommand_and_flag():
    render_reference = _reference_hook().render_reference
    parser = build_parser()
    page = render_reference(parser)
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in {"": parser, **subs.choices}.items():
        assert f"## checkpoint-tui {name}".rstrip() in page
        for action in sub._actions:
            if action.help != argparse.SUPPRESS:
                assert all(f"`{opt}" in page or f", {opt}" in page for opt in action.option_strings), action
    assert "## Exit codes" in page and "| 2 (`USAGE`)" in page


def _reference_rows(page: str) -> dict[str, dict[str, tuple[str, str]]]:
    """{section: {argument: (default cell, what cell)}} of the generated reference."""
    rows: dict[str, dict[str, tuple[str, str]]] = {}
    section = ""
    for line in page.splitlines():
        if line.startswith("## "):
            section = line[3:]
            rows[section] = {}
        elif line.startswith("| `"):
            name, default, what = (c.strip() for c in re.split(r"(?<!\\)\|", line)[1:4])
            rows[section][name.strip("`")] = (default, what)
    return rows


def test_the_reference_shows_every_default_including_the_global_flags():
    """The default column is filled wherever a flag has one: the parser's own (`1`) or the one its help
    says happens at run time (--home: cwd, from env CHECKPOINT_HOME or the working directory); that
    phrase moves out of the "what" column, and where both are given they agree."""
    hook = _reference_hook()
    parser = build_parser()
    rows = _reference_rows(hook.render_reference(parser))
    top = rows["checkpoint-tui"]
    assert top["--home HOME"] == ("cwd", "directory holding run/ and artifacts/ (env CHECKPOINT_HOME)")
    assert top["--namespace NAMESPACE"][0] == "default"
    assert top["--ledger URL"][0] == "SQLite in run/"
    assert top["--temporal-address HOST:PORT"][0] == "a dev server this home starts"
    assert top["--workers N"][0] == "1" and top["--refresh S"][0] == "`0.5`"  # 1 said in its help: node gets 2
    assert rows["checkpoint-tui chaos"]["--pauses PAUSES"][0] == "`0`"  # 0 is a default, not "none"
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    filled = 0
    for name, sub in {"": parser, **subs.choices}.items():
        section = rows[f"checkpoint-tui {name}".rstrip()]
        for action in sub._actions:
            if action.help in (None, argparse.SUPPRESS) or isinstance(action, argparse._SubParsersAction):
                continue
            _, said = hook.split_default(action.help % {"default": action.default})
            shown = ", ".join(action.option_strings) or action.metavar or action.dest
            cell = next(c for n, c in section.items() if n == shown or n.startswith(shown + " "))
            if said is not None or has_default(action):
                assert cell[0], f"checkpoint-tui {name} {action.option_strings}: empty default"
                assert not re.search(r"\bdefault\b", cell[1]), cell
                filled += 1
            if said is not None and action.default is not None:
                value = action.default
                assert said in ({str(value), f"{value:g}"} if isinstance(value, float) else {str(value)}), (
                    f"{action.option_strings}: the help says default {said}, the parser {value!r}"
                )
    assert filled >= 25, filled


def test_the_reference_takes_a_default_out_of_the_help_as_written():
    split = _reference_hook().split_default
    assert split("steps (default 30)") == ("steps", "30")
    assert split("the seconds (default 0.5; 1.0 costs less CPU)") == ("the seconds (1.0 costs less CPU)", "0.5")
    assert split("a queue (env Q; default: one per home)") == ("a queue (env Q)", "one per home")
    assert split("wait (default 15, 1-600)") == ("wait (1-600)", "15")
    assert split("a server (env U; key from K); default: the offline one") == (
        "a server (env U; key from K)",
        "the offline one",
    )
    assert split("the default route is kept") == ("the default route is kept", None)


def test_no_history_wording_in_the_docs():
    """History lives in CHANGELOG.md and the commit messages."""
    pattern = re.compile(r"this session(?!'s)|last session|at the start of the session|end of the session", re.I)
    for path in [*doc_files(), *sorted((ROOT / "src").rglob("*.py"))]:
        hits = [n for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
        assert not hits, f"{path.relative_to(ROOT)}: lines {hits}"
