"""The architecture contracts that import-linter cannot express: where SQL and environment reads may
live, and how big a module or a function may grow. Each scans the package's source with `ast`."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import checkpoint_tui

PKG = Path(checkpoint_tui.__file__).parent
ROOT_MODULE_LIMIT = 6
MODULE_LINE_LIMIT = 400
FUNCTION_LINE_LIMIT = 60
SQL = re.compile(
    r"^\s*(SELECT\b.+\bFROM\b|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b|DELETE\s+FROM\b|CREATE\s+(TABLE|INDEX)\b|"
    r"PRAGMA\s+\w+|ALTER\s+TABLE\b)",
    re.DOTALL,  # our SQL is written in capitals: prose that says 'select ... from' is not SQL
)


def modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def rel(path: Path) -> str:
    return str(path.relative_to(PKG))


def strings(tree: ast.AST) -> list[str]:
    """Every string constant, with adjacent literals and f-string parts joined as the parser sees them."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            found.append("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
    return found


def test_no_sql_outside_the_ledger():
    offenders = [
        f"{rel(p)}: {s[:60]!r}"
        for p in modules()
        if p.parent.name != "ledger"
        for s in strings(ast.parse(p.read_text()))
        if SQL.search(s)
    ]
    assert offenders == []


def test_the_sql_detector_sees_sql():  # the test above must be able to fail
    assert SQL.search("SELECT COUNT(*) FROM steps WHERE run_id = ?")
    assert SQL.search("UPDATE runs SET first_execution = ?")
    assert not SQL.search("select a step from the timeline")


def test_no_environment_reads_outside_settings_and_cli():
    offenders = []
    for p in modules():
        if rel(p).startswith(("settings/", "cli/", "lab/")):  # lab/: the Python API, an entry point
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
                offenders.append(f"{rel(p)}:{node.lineno} os.{node.attr}")
    assert offenders == []


def test_package_root_holds_entry_points_and_settings_only():
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= ROOT_MODULE_LIMIT, root


def test_modules_and_functions_stay_small():
    sizes = {rel(p): len(p.read_text().splitlines()) for p in modules()}
    big_modules = [f"{name}: {n} lines" for name, n in sizes.items() if n > MODULE_LINE_LIMIT]
    big_functions = []
    for p in modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINE_LIMIT:
                    big_functions.append(f"{rel(p)}:{node.lineno} {node.name}: {length} lines")
    assert big_modules == [] and big_functions == []


def test_only_the_tui_imports_textual_and_only_the_cli_opens_the_tui():
    offenders = []
    for p in modules():
        parts = p.relative_to(PKG).parts
        if parts[0] == "tui":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] == "textual":
                    offenders.append(f"{rel(p)}: {name}")
                if name.startswith("checkpoint_tui.tui") and parts[0] != "cli":
                    offenders.append(f"{rel(p)}: {name}")
    assert offenders == []


def test_import_contracts_hold():
    """import-linter's layers and forbidden contracts (pyproject.toml); `make test` runs it too."""
    lint = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(lint)], capture_output=True, text=True, timeout=120, cwd=PKG.parent.parent)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "4 kept, 0 broken" in out.stdout


# What asks "is this our loop or a user's workflow": allowed only in the adapters (workloads/), where a
# process is spawned (ops/) and where the settings are read (settings/). docs/architecture.md says why
# each of those places asks.
KIND_QUESTION = re.compile(
    r"isinstance\([^)]*(UserWorkflow|AgentLoopWorkload)|is_user_workflow|\buser_worker\b|\buser_cmd\b|unit == .step."
)
MAY_ASK = ("workloads/", "ops/", "settings/")


def test_only_the_adapters_ask_which_workload_runs():
    offenders = [
        f"{rel(p)}:{n}: {line.strip()}"
        for p in modules()
        if not rel(p).startswith(MAY_ASK)
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if KIND_QUESTION.search(line)
    ]
    assert offenders == []
    assert KIND_QUESTION.search("if isinstance(workload, UserWorkflow):")
    assert KIND_QUESTION.search("if settings.user_worker:")


FRAMEWORK_MODULES = (
    "pydantic_ai",
    "agents",
    "openai",
    "temporalio.contrib.openai_agents",
    "temporalio.openai_agents",
    "temporalio.contrib.pydantic",
    "langgraph",
    "langchain_core",
    "temporalio.langgraph",
    "temporalio.contrib.langgraph",
    "strands",
    "temporalio.strands_agents",
    "temporalio.contrib.strands",
    "google.adk",
    "google.genai",
    "temporalio.google_adk",
    "deepagents",
    "temporalio.deepagents",
)


def imported_names(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def test_only_the_framework_modules_import_an_agent_framework():
    """import-linter checks root packages only: the frameworks' Temporal modules live inside temporalio."""
    offenders = [
        f"{rel(p)}: {name}"
        for p in modules()
        if p.relative_to(PKG).parts[0] != "frameworks"
        for name in imported_names(ast.parse(p.read_text()))
        if any(name == m or name.startswith(m + ".") for m in FRAMEWORK_MODULES)
    ]
    assert offenders == []
    assert any(
        n.startswith("temporalio.contrib.openai_agents")
        for n in imported_names(ast.parse("from temporalio.contrib.openai_agents import workflow"))
    ), "the detector sees the import"


def test_the_architecture_page_states_the_layers_the_contracts_check():
    """docs/architecture.md's layer lines are the import-linter contracts' own (pyproject.toml)."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    contracts = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    page = " ".join((root / "docs" / "architecture.md").read_text().split())
    layers = [c for c in contracts if c["type"] == "layers"]
    assert len(layers) == 2
    for contract in layers:
        line = contract["name"].split(": ", 1)[1]
        assert f"`{line}`" in page or line.split("by job: ")[-1] in page, line
    top = next(c for c in layers if "containers" not in c)
    shown = [name.replace("checkpoint_tui.", "") for name in top["layers"]]
    assert " > ".join(shown) in page  # the contract's layers are the name's (the name is what the page shows)


def import_circles(graph) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    ours = sorted(m for m in graph.modules if m.startswith("checkpoint_tui"))
    for root in ours:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next((w for w in edges if w.startswith("checkpoint_tui")), None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        part.append(w)
                        if w == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(graph.find_modules_directly_imported_by(nxt)))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return found


def test_no_import_circles_even_under_type_checking():
    import grimp

    assert import_circles(grimp.build_graph("checkpoint_tui", exclude_type_checking_imports=False)) == []
    toy = grimp.ImportGraph()  # the detector sees a circle when there is one
    for a, b in (("checkpoint_tui.a", "checkpoint_tui.b"), ("checkpoint_tui.b", "checkpoint_tui.a")):
        toy.add_import(importer=a, imported=b)
    assert import_circles(toy) == [["checkpoint_tui.a", "checkpoint_tui.b"]]
