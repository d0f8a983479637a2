"""The shape of the code: packages by where code runs, arrows that point one way, small modules,
light Locust processes.

Every import counts: module level, inside functions, and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from tests.support.processes import ROOT

PACKAGE = os.path.join(ROOT, "llmload")
MAX_LINES = 400
MAX_TOP_LEVEL_MODULES = 4

# What each package may import of llmload's other packages: a package stands only on those below
# it. ``__init__`` is ``llmload`` itself (``__version__``); ``files`` is the run's file contract.
PURE = {"wire", "files", "metrics"}
MAY_IMPORT: dict[str, set[str]] = {
    "files": set(),
    "wire": set(),
    "net": set(),
    "metrics": {"wire", "net", "files"},
    "transport": {"wire", "net", "metrics", "files", "__init__"},
    "workload": {"wire", "net", "metrics", "files"},
    "server_metrics": {"wire", "net", "metrics", "files"},
    "report": {"files", "metrics", "server_metrics", "__init__"},
    "mock": {"wire", "net", "argtypes", "__init__"},
    "health": {"wire", "net", "metrics", "files"},
    "shapes": {"wire", "net", "metrics", "files", "health"},
    "plugin": {"wire", "net", "metrics", "files", "transport", "workload", "server_metrics", "health", "shapes",
               "__init__"},
    "calibrate": {"wire", "net", "metrics", "files", "transport", "workload", "health", "shapes", "mock", "__init__"},
    "demo": {"files", "mock", "report", "__init__"},
    "sweep": {"files", "metrics", "workload", "report", "server_metrics", "__init__"},
    "argtypes": set(),
    "cli": {"files", "argtypes", "metrics", "workload", "shapes", "mock", "report", "calibrate", "demo", "plugin",
            "sweep", "__init__"},
    "__init__": set(),
}
# Imported by pure code never: what would tie it to a process, a loop or a plotting stack.
HEAVY = {"locust", "gevent", "greenlet", "pandas", "matplotlib", "zmq"}


def modules() -> dict[str, str]:
    out = {}
    for base, _dirs, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(base, f)
                rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                out[rel.removesuffix(".__init__")] = path
    return out


def package_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1]


def all_imports(name: str, path: str, known: set[str]) -> tuple[set[str], set[str]]:
    """(llmload modules, other top-level packages) imported anywhere in the module."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out: set[str] = set()
    external: set[str] = set()
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "llmload":
                    if (m := resolve(a.name)) is not None:
                        out.add(m)
                else:
                    external.add(a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            if base.split(".")[0] != "llmload":
                external.add(base.split(".")[0])
                continue
            for a in node.names:
                if (m := resolve(f"{base}.{a.name}")) is not None:
                    out.add(m)
    return {m for m in out if m != name}, external


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: all_imports(name, path, known)[0] for name, path in mods.items()}


def line_count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def test_no_module_is_over_400_lines():
    long = {name: n for name, path in modules().items() if (n := line_count(path)) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_at_most_four_modules_at_the_top_level():
    top = sorted(f for f in os.listdir(PACKAGE) if f.endswith(".py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    assert set(MAY_IMPORT) >= {package_of(m) for m in modules()}, "a package the arrows below do not place"


def test_package_arrows_point_down():
    g = graph()
    assert "llmload.plugin.config" in g["llmload.plugin.users"]  # the walk sees imports at all
    wrong = sorted(f"{a} -> {b}" for a, bs in g.items() for b in bs
                   if package_of(a) != package_of(b) and package_of(b) not in MAY_IMPORT[package_of(a)])
    assert not wrong, "imports against the package arrows:\n" + "\n".join(wrong)


def test_the_client_imports_nothing_of_the_mock():
    g = graph()
    client = {"wire", "net", "metrics", "transport", "workload", "plugin", "shapes", "health", "server_metrics"}
    wrong = sorted(f"{a} -> {b}" for a, bs in g.items() if package_of(a) in client
                   for b in bs if package_of(b) == "mock")
    assert not wrong, wrong


def test_pure_packages_and_the_report_load_no_locust_or_gevent():
    mods = modules()
    known = set(mods)
    for name, path in mods.items():
        pkg = package_of(name)
        _, external = all_imports(name, path, known)
        if pkg in PURE:
            assert not external & HEAVY, f"{name} imports {external & HEAVY}"
        if pkg == "report":
            assert not external & {"locust", "gevent", "greenlet", "zmq"}, f"{name} imports {external}"


def test_locust_processes_load_neither_pandas_nor_the_report():
    code = ("import sys\nimport llmload.plugin.wiring, llmload.plugin.users, llmload.shapes.load_shapes\n"
            "print(sorted(m for m in sys.modules if m == 'pandas' or m.startswith('llmload.report')"
            " or m == 'matplotlib' or m.startswith('llmload.mock')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_no_import_cycle_counting_every_import():
    g = graph()
    mods = modules()
    # A package's __init__ re-exporting its submodules is not a cycle: Python loads the package
    # first and the submodules never import the package itself.
    edges = {a: {b for b in bs if not (a.startswith(b + ".") and mods[b].endswith("__init__.py"))}
             for a, bs in g.items()}
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


def test_no_module_takes_the_plugin():
    """Only the user class holds the plugin (its composition root, wiring.py); everything else gets
    a narrow part: a role, RunFiles, a LiveView, a ShapeControl."""
    g = graph()
    takers = sorted(a for a, bs in g.items() if "llmload.plugin.wiring" in bs)
    assert takers == ["llmload.plugin.users"], takers
    reach = []
    for name, path in modules().items():
        if name == "llmload.plugin.wiring":
            continue
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):  # getattr(environment, "llmload"): the plugin by another door
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value == "llmload":
                reach.append(name)
            if isinstance(node, ast.Attribute) and node.attr == "llmload" and isinstance(node.value, ast.Name) \
                    and node.value.id in ("env", "environment"):
                reach.append(name)
    assert not reach, f"modules that take the plugin from the environment: {sorted(set(reach))}"
