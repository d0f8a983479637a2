"""The shape of the code: small modules, imports that flow one way, light Locust processes."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from tests.conftest import ROOT

PACKAGE = os.path.join(ROOT, "llmload")
MAX_LINES = 400


def modules() -> dict[str, str]:
    out = {}
    for base, _dirs, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(base, f)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = path
    return out


def module_imports(name: str, path: str, known: set[str]) -> set[str]:
    """llmload modules imported at module level (not under TYPE_CHECKING, not inside functions)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out: set[str] = set()
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]

    def visit(nodes: list[ast.stmt]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name in known)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                for a in node.names:
                    full = f"{base}.{a.name}"
                    out.add(full if full in known else base)
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(getattr(node, "orelse", []))
    visit(tree.body)
    return {m for m in out if m in known and m != name}


def line_count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def test_no_module_is_over_400_lines():
    long = {name: n for name, path in modules().items() if (n := line_count(path)) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_cycles():
    mods = modules()
    known = set(mods)
    graph = {name: module_imports(name, path, known) for name, path in mods.items()}
    assert graph["llmload.plugin.users"] >= {"llmload.plugin.wiring", "llmload.plugin.config"}  # the walk sees imports at all
    # A package's __init__ re-exporting its submodules is not a cycle: Python loads the package
    # first and the submodules never import the package itself.
    edges = {a: {b for b in bs if not (a.startswith(b + ".") and b in graph and mods[b].endswith("__init__.py"))}
             for a, bs in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                dfs(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            dfs(name)


def test_the_mock_and_the_report_import_nothing_from_the_other_side():
    mods = modules()
    known = set(mods)
    client = {"llmload.plugin.wiring", "llmload.plugin.users", "llmload.transport", "llmload.workload", "llmload.plugin.config"}
    for name, path in mods.items():
        imported = module_imports(name, path, known)
        if name.startswith("llmload.mock"):
            assert not {m for m in imported if any(m == c or m.startswith(c + ".") for c in client)}, name
        if name.startswith("llmload.report"):
            assert not {m for m in imported if m in {"llmload.plugin.wiring", "llmload.plugin.users", "llmload.shapes.load_shapes"}}, name


def test_locust_processes_load_neither_pandas_nor_the_report():
    code = ("import sys\nimport llmload.plugin.wiring, llmload.plugin.users, llmload.shapes.load_shapes\n"
            "print(sorted(m for m in sys.modules if m == 'pandas' or m.startswith('llmload.report')"
            " or m == 'matplotlib'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
