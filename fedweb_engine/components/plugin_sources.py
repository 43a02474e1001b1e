"""Where a plugin's code comes from, for provenance: the plugins this process imported, a hash of
their source files as first read, and the version of the distribution that installed each
(``plugin_info`` reports both; the registry re-exports these names)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import sys
from pathlib import Path
from typing import Any


def hash_files(plugin: str) -> str | None:
    module = sys.modules.get(plugin) or importlib.import_module(plugin)
    files = source_files(module)
    if not files:
        return None
    digest = hashlib.sha256()
    root = files[0].parent if len(files) == 1 else Path(module.__file__).parent
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def source_files(module) -> list[Path]:
    file = getattr(module, "__file__", None)
    if not file:
        return []
    if hasattr(module, "__path__"):  # a package: all of its Python files
        return sorted(p for p in Path(file).parent.rglob("*.py") if "__pycache__" not in p.parts)
    return [Path(file)]


def distribution_version(plugin: str) -> str | None:
    try:
        dists = importlib.metadata.packages_distributions().get(plugin, [])
    except Exception:  # a broken installed metadata file must not break provenance
        return None
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


_loaded_plugins: dict[str, str] = {}  # top-level module -> how it was found ("FEDWEB_PLUGINS" or "entry point <dist>")


def note_plugin(module_name: str, source: str) -> None:
    """Called by discovery: ``module_name`` was imported as a plugin (found via ``source``)."""
    top = module_name.split(".")[0]
    _loaded_plugins[top] = source
    source_hash(top)  # fixed now: the code just imported


def plugin_of(module: str) -> str:
    """The plugin a module belongs to: its top-level package (``my_plugin.models`` -> ``my_plugin``)."""
    return module.split(".")[0]


def plugin_info(plugin: str) -> dict[str, Any]:
    """``{"version", "hash"}`` of a plugin: its distribution's version when installed as a package,
    and a SHA-256 over its source files (every ``.py`` of the package, sorted by path)."""
    return {"version": distribution_version(plugin), "hash": source_hash(plugin)}


_hashes: dict[str, str | None] = {}  # plugin -> hash of its source as first read in this process


def source_hash(plugin: str) -> str | None:
    """The plugin's source hash as this process loaded it: computed once, when the plugin is
    noted at import (or first asked for), so a file edited under a running worker does not make
    it report code it is not running."""
    if plugin not in _hashes:
        _hashes[plugin] = hash_files(plugin)
    return _hashes[plugin]
