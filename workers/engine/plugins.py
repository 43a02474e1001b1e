"""``FEDWEB_PLUGINS``: user modules imported by every process that trains.

The value is a comma-separated list of importable module names. Each process that runs user code
imports them at start-up: the Celery worker (``fedweb/celery.py``), the engine command line and
the child of ``compute.isolation = "process"``. What a module does on import (register a model,
wrap a trainer) is its own business; this is only the loading half of a future plugin contract.

A module that fails to import stops start-up with its name in the message (as pytest does for its
plugins): a worker that silently ran without the user's code would run a different experiment.
This module lives in the engine, not in ``fedweb/``, because the engine must not import Django.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from types import ModuleType

PLUGINS_ENV = "FEDWEB_PLUGINS"


class PluginError(ImportError):
    """A module named in ``FEDWEB_PLUGINS`` could not be imported."""


def plugin_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """The module names listed in ``FEDWEB_PLUGINS`` (blanks ignored), in order."""
    value = (os.environ if environ is None else environ).get(PLUGINS_ENV, "")
    return [name.strip() for name in value.split(",") if name.strip()]


def load_plugins(environ: Mapping[str, str] | None = None) -> list[ModuleType]:
    """Import every module of ``FEDWEB_PLUGINS``; importing twice is a no-op (Python caches modules)."""
    modules = []
    for name in plugin_names(environ):
        try:
            modules.append(importlib.import_module(name))
        except Exception as e:  # any failure, not only ImportError: a plugin may raise while importing
            raise PluginError(f"{PLUGINS_ENV}: module {name!r} failed to import: {type(e).__name__}: {e}") from e
    return modules
