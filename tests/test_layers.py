"""The import graph of FedWeb's packages points one way: no loops, few function-local imports,
small files, and each layer imports only its own layer and those below it.

The folder tree is the layer table. Layers, lowest first (docs/architecture.md's *Layers* says the same):

- ``engine``: ``fedweb_engine``, plain PyTorch, no Django;
- ``domain``: experiments and their state machine, records, sweeps, the fleet (workers, queues,
  policies, scheduling, gangs), external runs, what the domain announces (``orchestrator/live``)
  and accounts (teams, memberships, invitations, API tokens);
- ``glue``: what runs in a worker process (``workers``: tasks, rounds, heartbeats); it calls the
  domain, and the domain reaches it only by Celery task names and signals;
- ``web``: views, forms, the API, the sockets, templatetags, management commands, the Django app's
  wiring (``orchestrator``'s AppConfig, admin and the models module that gathers each concern's
  models for Django) and the project's settings, URLs and Celery configuration (``fedweb``).

``FOLDERS`` names a layer for each top-level package and each subfolder of ``orchestrator`` and
``accounts``, and for nothing else: a module's layer is its folder's, and a module that belongs to
another layer moves to a folder of that layer.

The graph counts function-local imports too: an import inside a function hides an edge, it does
not remove it. One is allowed only where the module does not always need a heavy dependency
(torch in the web process) or where Django allows it no earlier (``AppConfig.ready``), and it
carries a comment saying why (``why:``).

``from pkg import name`` is an edge to the module that defines ``name``: to ``pkg.name`` when that
is a module, to the module ``pkg/__init__.py`` re-exports it from, else to ``pkg`` itself. So a
submodule importing a sibling through its package (``from fedweb_engine.components import registry``) is no
edge to the package, whose ``__init__`` only re-exports: Python runs that ``__init__`` first, but
nothing in the design depends on it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fedweb", "fedweb_engine", "orchestrator", "accounts", "workers")
MAX_LOCAL_IMPORTS = 10
MAX_LINES = 400

ENGINE, DOMAIN, GLUE, WEB = range(4)
LAYER_NAMES = ("engine", "domain", "glue", "web")
# Folder (a package, dotted) -> layer. Folders only: a module is in its folder's layer.
FOLDERS: dict[str, int] = {
    "fedweb_engine": ENGINE,
    "orchestrator.experiments": DOMAIN,
    "orchestrator.sweeps": DOMAIN,
    "orchestrator.runs": DOMAIN,  # the runs table: its query language, vocabulary, saved views
    "orchestrator.storage": DOMAIN,  # what a run keeps on disk, and retention
    "orchestrator.fleet": DOMAIN,
    "orchestrator.external": DOMAIN,
    "orchestrator.live": DOMAIN,  # the events the domain announces, and their one send
    "accounts": DOMAIN,  # the Django app of teams: its models, their rules and their admin
    "workers": GLUE,
    "orchestrator": WEB,  # the Django app's wiring: AppConfig, admin, the models module Django reads
    "orchestrator.web": WEB,
    "orchestrator.api": WEB,
    "orchestrator.sockets": WEB,
    "orchestrator.templatetags": WEB,
    "orchestrator.management": WEB,
    "accounts.web": WEB,
    "fedweb": WEB,  # settings, URLs, ASGI/WSGI and the Celery app's configuration
}


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    local: bool  # inside a function
    why: bool  # a "why:" comment on the import or the line above it


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _resolve(name: str, is_package: bool, stmt: ast.ImportFrom) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = name.split(".") if is_package else name.split(".")[:-1]
    parts = parts[: len(parts) - stmt.level + 1]
    return ".".join([*parts, stmt.module] if stmt.module else parts)


def _owner(target: str, known) -> str | None:
    """The longest known module that ``target`` names (``a.b.func`` -> ``a.b``)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def _statements(tree: ast.Module):
    """Every import statement with whether it sits inside a function."""
    local = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            local.update(id(n) for n in ast.walk(node) if n is not node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, id(node) in local


def _reexports(modules: dict[str, Path]) -> dict[str, dict[str, str]]:
    """For each package: the names its ``__init__`` imports, and the module each comes from."""
    out: dict[str, dict[str, str]] = {}
    for name, path in modules.items():
        if path.name != "__init__.py":
            continue
        names = out.setdefault(name, {})
        for stmt, _ in _statements(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(stmt, ast.ImportFrom):
                base = _resolve(name, True, stmt)
                for alias in stmt.names:
                    origin = _owner(f"{base}.{alias.name}", modules) or base
                    names[alias.asname or alias.name] = origin
    return out


def _says_why(lines: list[str], stmt: ast.stmt) -> bool:
    """A "why:" comment on the import, or in the comment lines right above it (and above the
    imports grouped with it)."""
    text = lines[stmt.lineno - 1 : stmt.end_lineno]
    k = stmt.lineno - 2
    while k >= 0 and lines[k].strip().startswith(("#", "from ", "import ")):
        text.append(lines[k])
        k -= 1
    return any("why:" in line for line in text)


def imports() -> list[Import]:
    """Every import of a FedWeb module by another, module-level and function-local."""
    modules = _modules()
    reexports = _reexports(modules)
    found = []
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for stmt, local in _statements(ast.parse(text)):
            if isinstance(stmt, ast.Import):
                targets = {_owner(alias.name, modules) for alias in stmt.names}
            else:
                base = _resolve(name, path.name == "__init__.py", stmt)
                targets = set()
                for alias in stmt.names:
                    module = f"{base}.{alias.name}"
                    if module in modules:
                        targets.add(module)
                    elif alias.name in reexports.get(base, {}):
                        targets.add(_owner(reexports[base][alias.name], modules))
                    else:
                        targets.add(_owner(base, modules))
            why = _says_why(lines, stmt)
            for target in targets - {None, name}:
                found.append(Import(name, target, stmt.lineno, local, why))
    return found


def graph_of(found: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for imp in found:
        graph.setdefault(imp.source, set()).add(imp.target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def layer_of(module: str) -> int:
    owner = _owner(module, FOLDERS)
    assert owner is not None, f"{module} is in no layer: add its folder to FOLDERS"
    return FOLDERS[owner]


def table_problems(folders: dict[str, int]) -> list[str]:
    """What makes ``folders`` other than the folder tree: a key that is no package folder (a module
    given its own layer is an exception), or a top-level package or a subfolder of orchestrator or
    accounts with no layer of its own."""
    problems = [f"{name} is no package folder" for name in folders if not _is_package(name)]
    wanted = set(PACKAGES) | {
        f"{app}.{d.name}" for app in ("orchestrator", "accounts") for d in (ROOT / app).iterdir()
        if _is_package(f"{app}.{d.name}") and d.name != "migrations"
    }  # fmt: skip
    return problems + [f"{name} has no layer" for name in sorted(wanted - set(folders))]


def _is_package(dotted: str) -> bool:
    return (ROOT / dotted.replace(".", "/") / "__init__.py").is_file()


def upward(found: list[Import]) -> list[str]:
    """Imports of a higher layer by a lower one, as readable lines."""
    return [
        f"{i.source} ({LAYER_NAMES[layer_of(i.source)]}) imports {i.target} ({LAYER_NAMES[layer_of(i.target)]}), line {i.line}"
        for i in found
        if layer_of(i.target) > layer_of(i.source)
    ]


def local_problems(found: list[Import]) -> list[str]:
    """Function-local project imports over the budget, or without a "why:" comment."""
    local = sorted({(i.source, i.line, i.why) for i in found if i.local})
    problems = [f"{source}, line {line}: no 'why:' comment" for source, line, why in local if not why]
    if len(local) > MAX_LOCAL_IMPORTS:
        where = ", ".join(f"{source}:{line}" for source, line, _ in local)
        problems.append(
            f"{len(local)} function-local imports of project modules (at most {MAX_LOCAL_IMPORTS}): {where}"
        )
    return problems


def long_files(limit: int = MAX_LINES) -> list[str]:
    return [
        f"{name} has {n} lines"
        for name, path in sorted(_modules().items())
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > limit
    ]


@pytest.fixture(scope="module")
def found() -> list[Import]:
    found = imports()
    sources = {i.source for i in found}
    assert {
        "orchestrator.experiments.models",
        "fedweb_engine.simulation.runner",
        "workers.tasks",
    } <= sources  # it read the tree
    return found


def test_no_import_loops_counting_function_local_imports(found):
    cycle = find_cycle(graph_of(found))
    assert cycle is None, "import loop: " + " -> ".join(cycle)


def test_function_local_imports_are_few_and_say_why(found):
    assert local_problems(found) == []


def test_no_file_over_the_line_limit():
    assert long_files() == []


def test_every_import_points_down_the_layers(found):
    assert upward(found) == []


def test_every_module_is_in_a_layer():
    for name in _modules():
        layer_of(name)


def test_no_module_imports_the_models_module_django_reads(found):
    # Each model is imported from its concern; orchestrator/models.py only gathers them for Django.
    assert [f"{i.source}, line {i.line}" for i in found if i.target == "orchestrator.models"] == []


def test_the_layer_table_is_the_folder_tree():
    assert table_problems(FOLDERS) == []
    # A module given a layer of its own, and a subfolder left out, are both reported.
    tampered = {**FOLDERS, "orchestrator.sweeps.stats": WEB}
    del tampered["orchestrator.sockets"]
    assert table_problems(tampered) == [
        "orchestrator.sweeps.stats is no package folder",
        "orchestrator.sockets has no layer",
    ]


def test_the_checks_fail_on_a_tampered_graph(found):
    # A loop closed by a function-local import, a domain module importing the glue, and an
    # eleventh function-local import without a comment: each is reported.
    tampered = [
        *found,
        Import("orchestrator.experiments.models", "workers.tasks", 1, local=True, why=False),
        *(Import("orchestrator.fleet.scheduling", "workers.rounds", n, local=True, why=True) for n in range(2, 12)),
    ]
    cycle = find_cycle(graph_of(tampered))
    assert cycle is not None and "orchestrator.experiments.models" in cycle and "workers.tasks" in cycle
    assert "orchestrator.experiments.models (domain) imports workers.tasks (glue), line 1" in upward(tampered)
    problems = local_problems(tampered)
    assert "orchestrator.experiments.models, line 1: no 'why:' comment" in problems
    assert any(
        p.startswith(f"{len({(i.source, i.line) for i in tampered if i.local})} function-local") for p in problems
    )
    assert long_files(limit=10)  # a lower limit finds files over it
    # A domain module importing the hub Django reads (orchestrator.models, the app's wiring) climbs.
    hub = [Import("orchestrator.fleet.queues", "orchestrator.models", 3, local=False, why=False)]
    assert upward(hub) == ["orchestrator.fleet.queues (domain) imports orchestrator.models (web), line 3"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_reexports_through_a_package_are_edges_to_their_module(found):
    # fedweb_engine's __init__ re-exports Spec from fedweb_engine.spec.schema: importing it through
    # the package is an edge to spec, not to the package.
    sources = {(i.source, i.target) for i in found}
    assert ("orchestrator.experiments.models", "fedweb_engine.spec.schema") in sources
    assert not any(t == "fedweb_engine" and s.startswith("fedweb_engine.") for s, t in sources)


@pytest.mark.slow
def test_it_imports_every_package_in_a_fresh_interpreter():
    # Each package first, then every module of it, in its own interpreter: an import order that only
    # works when something else was imported before shows up here.
    modules = sorted(_modules())
    for package in (*PACKAGES, "fedweb_engine"):
        mine = [m for m in modules if m.startswith(f"{package}.") and not m.endswith("__main__")]
        if package == "workers":
            mine = [m for m in mine if not m.startswith("fedweb_engine")]
        setup = "" if package == "fedweb_engine" else "django.setup(); "  # the engine runs without Django
        code = (
            "import importlib, os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'fedweb.settings'); "
            f"importlib.import_module({package!r}); {setup}"
            f"[importlib.import_module(m) for m in {mine!r}]"
        )
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"import {package}: {done.stderr[-2000:]}"
