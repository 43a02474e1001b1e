"""A component's factory named as ``"module:attribute"``: imported when first needed, not when registered.

The built-ins are registered this way (:mod:`fedweb_engine.components.builtins`), so reading the
registry (names, options, traits, help) imports none of their code, and none of torch. The help
text, the first paragraph of the factory's docstring, is read from the module's source with
``ast``: the module is parsed, never run.
"""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
from collections.abc import Callable
from functools import lru_cache
from typing import Any


class BadReference(ValueError):
    """A reference that is not ``"package.module:attribute"``, or that does not resolve."""


def is_reference(value: Any) -> bool:
    return isinstance(value, str)


def check_reference(reference: str) -> tuple[str, str]:
    """``(module, attribute)`` of a well-formed reference (nothing is imported)."""
    module, sep, attribute = reference.partition(":")
    names = [*module.split("."), *attribute.split(".")]
    if not sep or not all(n.isidentifier() for n in names):
        raise BadReference(f"a factory reference must be 'package.module:attribute', not {reference!r}")
    return module, attribute


def resolve(reference: str) -> Callable[..., Any]:
    """Import the module and return the attribute a reference names."""
    module, attribute = check_reference(reference)
    target: Any = importlib.import_module(module)
    for name in attribute.split("."):
        try:
            target = getattr(target, name)
        except AttributeError:
            raise BadReference(f"{reference!r}: module {module} has no {attribute}") from None
    if not callable(target):
        raise BadReference(f"{reference!r} names {type(target).__name__}, not a function or class")
    return target


@lru_cache(maxsize=256)
def docstring(reference: str) -> str:
    """The docstring of the function or class a reference names, read from its module's source
    without running it ("" when the source or the definition cannot be found)."""
    module, attribute = check_reference(reference)
    try:
        source = _source(module)
    except (ImportError, OSError, ValueError):
        return ""
    if source is None:
        return ""
    nodes: list[ast.stmt] = ast.parse(source).body
    node: ast.AST | None = None
    for name in attribute.split("."):
        node = next((n for n in nodes if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name), None)
        if node is None:
            return ""
        nodes = node.body
    return ast.get_docstring(node) or ""


def _source(module: str) -> str | None:
    """A module's source, found along its packages' paths without importing them (importing
    ``fedweb_engine.models`` to find ``fedweb_engine.models.mlp`` would import torch)."""
    parts = module.split(".")
    spec = importlib.util.find_spec(parts[0])
    for depth in range(2, len(parts) + 1):
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:depth]), spec.submodule_search_locations)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "get_source"):
        return None
    return spec.loader.get_source(spec.name)
