"""The shape of the code: packages by where code runs, arrows that point one way, small modules,
light Locust processes.

Every import counts: module level, inside functions, and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys

from tests.support.processes import ROOT

PACKAGE = os.path.join(ROOT, "llmload")
MAX_LINES = 350
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
    "calibrate": {"wire", "net", "metrics", "files", "transport", "workload", "health", "shapes", "mock", "argtypes",
                  "__init__"},
    "demo": {"files", "mock", "report", "__init__"},
    "sweep": {"files", "metrics", "workload", "report", "server_metrics", "__init__"},
    "argtypes": set(),
    "cli": {"files", "argtypes", "metrics", "workload", "shapes", "mock", "report", "calibrate", "demo", "plugin",
            "sweep", "__init__"},
    "__init__": set(),
}
# The rooms inside the two big packages, and what each may import of its package's other rooms
# (each room's ``__init__`` docstring says the same). ``""`` is the package's own top-level modules:
# plugin.wiring (the composition root), the mock's server, options, launch and profiles.
ROOM_MAY_IMPORT: dict[str, dict[str, set[str]]] = {
    "plugin": {
        "options": set(),
        "output": {"options"},
        "run": {"options", "output"},
        "cluster": {"options", "run", "output"},
        "web": {"options", "run", "output", "cluster"},
        "users": {"options", "run", "cluster", ""},
        "": {"options", "run", "output", "cluster", "web", "users"},
    },
    "mock": {
        "api": set(),
        "engine": set(),
        "telemetry": {"engine"},
        "front": {"api", "engine", "telemetry"},
        "": {"api", "engine", "telemetry", "front"},
    },
}
# Rooms that read finished records and rows, never a user: the web UI and the exporters.
NO_USERS = {"plugin.web", "plugin.output"}
# The mock's HTTP layer, of which its engine imports nothing.
MOCK_HTTP = {"mock.api", "mock.front", "mock"}
MAX_PY_FILES_PER_FOLDER = 15
# Imported by pure code never: what would tie it to a process, a loop or a plotting stack.
HEAVY = {"locust", "gevent", "greenlet", "pandas", "matplotlib", "zmq"}


@functools.cache  # the tree does not change during a test session; parsed once, not once per test
def parsed(path: str) -> ast.Module:
    with open(path, encoding="utf-8") as f:
        return ast.parse(f.read())


@functools.cache
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


def room_of(module: str) -> str:
    """``plugin.users`` for ``llmload.plugin.users.llm_user``; ``plugin`` for ``llmload.plugin.wiring``."""
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in ROOM_MAY_IMPORT:
        sub = ROOM_MAY_IMPORT[parts[1]]
        return f"{parts[1]}.{parts[2]}" if parts[2] in sub and parts[2] != "" else parts[1]
    return package_of(module)


def all_imports(name: str, path: str, known: set[str]) -> tuple[set[str], set[str]]:
    """(llmload modules, other top-level packages) imported anywhere in the module."""
    tree = parsed(path)
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


@functools.cache
def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: all_imports(name, path, known)[0] for name, path in mods.items()}


def line_count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return sum(1 for _ in f)


def test_no_module_is_over_350_lines():
    long = {name: n for name, path in modules().items() if (n := line_count(path)) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_at_most_four_modules_at_the_top_level():
    top = sorted(f for f in os.listdir(PACKAGE) if f.endswith(".py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top
    assert set(MAY_IMPORT) >= {package_of(m) for m in modules()}, "a package the arrows below do not place"


def test_package_arrows_point_down():
    g = graph()
    assert "llmload.plugin.run.user_setup" in g["llmload.plugin.users.llm_user"]  # the walk sees imports at all
    wrong = sorted(f"{a} -> {b}" for a, bs in g.items() for b in bs
                   if package_of(a) != package_of(b) and package_of(b) not in MAY_IMPORT[package_of(a)])
    assert not wrong, "imports against the package arrows:\n" + "\n".join(wrong)


def test_room_arrows_inside_plugin_and_mock():
    g = graph()
    rooms = {r for r in map(room_of, g) if "." in r}
    for name, path in modules().items():  # every room's __init__ says what it may import: these arrows
        if "." in room_of(name) and path.endswith("__init__.py"):
            with open(path, encoding="utf-8") as f:
                doc = " ".join((ast.get_docstring(ast.parse(f.read())) or "").split())
            assert "May import" in doc, f"{name}: no 'May import'"
            said = doc.split("May import", 1)[1].split(";")[0].split(". ")[0]
            pkg, room = room_of(name).split(".")
            named = {w for w in re.findall(r"``(\w+)``", said) if w in ROOM_MAY_IMPORT[pkg]}
            assert named == ROOM_MAY_IMPORT[pkg][room] - {""}, f"{name}: its docstring says {sorted(named)}"
    assert rooms == {f"{p}.{r}" for p, sub in ROOM_MAY_IMPORT.items() for r in sub if r}, rooms
    wrong = []
    for a, bs in g.items():
        for b in bs:
            ra, rb = room_of(a), room_of(b)
            pkg = package_of(a)
            if pkg not in ROOM_MAY_IMPORT or package_of(b) != pkg or ra == rb:
                continue
            own = ra.partition(".")[2]
            if rb.partition(".")[2] not in ROOM_MAY_IMPORT[pkg][own]:
                wrong.append(f"{a} -> {b}")
    assert not wrong, "imports against the room arrows:\n" + "\n".join(sorted(wrong))


def test_the_web_ui_and_the_exporters_import_nothing_of_the_users():
    g = graph()
    wrong = sorted(f"{a} -> {b}" for a, bs in g.items() if room_of(a) in NO_USERS for b in bs
                   if room_of(b) == "plugin.users" or b in ("llmload.plugin.wiring", "llmload.plugin"))
    assert not wrong, wrong


def test_the_mock_engine_imports_nothing_of_its_http_layer():
    g = graph()
    wrong = sorted(f"{a} -> {b}" for a, bs in g.items() if room_of(a) == "mock.engine" for b in bs
                   if room_of(b) in MOCK_HTTP)
    assert not wrong, wrong


def test_no_folder_holds_more_than_15_modules():
    wide = {}
    for base, _dirs, files in os.walk(PACKAGE):
        n = sum(f.endswith(".py") for f in files)
        if n > MAX_PY_FILES_PER_FOLDER:
            wide[os.path.relpath(base, ROOT)] = n
    assert not wide, f"folders over {MAX_PY_FILES_PER_FOLDER} .py files: {wide}"


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
    code = ("import sys\nimport llmload.plugin.wiring, llmload.plugin.users.llm_user, llmload.shapes.load_shapes\n"
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
    assert takers == ["llmload.plugin.users.llm_user"], takers
    reach = []
    for name, path in modules().items():
        if name == "llmload.plugin.wiring":
            continue
        tree = parsed(path)
        for node in ast.walk(tree):  # getattr(environment, "llmload"): the plugin by another door
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "getattr" and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value == "llmload":
                reach.append(name)
            if isinstance(node, ast.Attribute) and node.attr == "llmload" and isinstance(node.value, ast.Name) \
                    and node.value.id in ("env", "environment"):
                reach.append(name)
    assert not reach, f"modules that take the plugin from the environment: {sorted(set(reach))}"
