"""No import loops: the module-level imports of FedWeb's packages form a graph without cycles.

A cycle kept alive by a function-local import is still a cycle in the design, but Python only
breaks on module-level ones; this graph is built from those, so any new top-level import that
closes a loop fails here instead of at start-up in one process and not another.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fedweb", "orchestrator", "accounts", "workers")


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


def _top_level_imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The FedWeb modules ``name`` imports at module level (including inside ``if``/``try``)."""
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        for stmt in ast.walk(node) if isinstance(node, ast.If | ast.Try) else [node]:
            if isinstance(stmt, ast.Import):
                targets.update(alias.name for alias in stmt.names)
            elif isinstance(stmt, ast.ImportFrom):
                base = _resolve(name, is_package, stmt)
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in stmt.names)  # "from pkg import module"
    return {_owner(t, known) for t in targets if _owner(t, known)} - {name}


def _resolve(name: str, is_package: bool, stmt: ast.ImportFrom) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = name.split(".") if is_package else name.split(".")[:-1]
    parts = parts[: len(parts) - stmt.level + 1]
    return ".".join([*parts, stmt.module] if stmt.module else parts)


def _owner(target: str, known: set[str]) -> str | None:
    """The longest known module that ``target`` names (``a.b.func`` -> ``a.b``)."""
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target or None


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _top_level_imports(name, path, set(modules)) for name, path in modules.items()}


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


def test_it_finds_no_cycle_among_module_level_imports():
    graph = import_graph()
    assert "orchestrator.models" in graph and "workers.engine.runner" in graph  # it read the tree
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_it_would_report_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.slow
def test_it_imports_every_package_in_a_fresh_interpreter():
    # Each package first, then every module of it, in its own interpreter: an import order that only
    # works when something else was imported before shows up here.
    modules = sorted(_modules())
    for package in (*PACKAGES, "workers.engine"):
        mine = [m for m in modules if m.startswith(f"{package}.") and not m.endswith("__main__")]
        if package == "workers":
            mine = [m for m in mine if not m.startswith("workers.engine")]
        setup = "" if package == "workers.engine" else "django.setup(); "  # the engine runs without Django
        code = (
            "import importlib, os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'fedweb.settings'); "
            f"importlib.import_module({package!r}); {setup}"
            f"[importlib.import_module(m) for m in {mine!r}]"
        )
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, f"import {package}: {done.stderr[-2000:]}"
