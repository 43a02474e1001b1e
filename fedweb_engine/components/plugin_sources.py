"""Where a plugin's code comes from, for provenance: a hash of its source files and the version of
the distribution that installed it (``registry.plugin_info`` reports both)."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import sys
from pathlib import Path


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
