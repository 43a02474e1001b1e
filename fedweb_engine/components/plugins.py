"""Plugin discovery: the modules named in ``FEDWEB_PLUGINS`` and the ``fedweb.plugins`` entry points.

Every process that validates or runs specs imports them at start-up: the web process
(``orchestrator/apps.py``, which a Celery worker runs too), the Celery worker (``workers/startup.py``), the engine command line
and the child of ``compute.isolation = "process"``. A plugin registers its components on import
with the decorators of :mod:`fedweb_engine.components.registry`.

``FEDWEB_PLUGINS`` is a comma-separated list of importable module names. An installed package
declares its module in its ``pyproject.toml``::

    [project.entry-points."fedweb.plugins"]
    example = "fedweb_plugin_example"

A plugin that fails to import stops start-up with its name and the error in the message (as
pytest does for its plugins): a worker that silently ran without the user's code would run a
different experiment, and a web server without it would give a 500 later instead of a clear
message now. This module lives in the engine, not in ``fedweb/``, because the engine must not
import Django.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType

import torch

from fedweb_engine.components import registry

PLUGINS_ENV = "FEDWEB_PLUGINS"
ENTRY_POINT_GROUP = "fedweb.plugins"


class PluginError(ImportError):
    """A plugin could not be imported (its name and the error are in the message)."""


def plugin_names(environ: Mapping[str, str] | None = None) -> list[str]:
    """The module names listed in ``FEDWEB_PLUGINS`` (blanks ignored), in order."""
    value = (os.environ if environ is None else environ).get(PLUGINS_ENV, "")
    return [name.strip() for name in value.split(",") if name.strip()]


def entry_points() -> list[importlib.metadata.EntryPoint]:
    """The installed ``fedweb.plugins`` entry points, sorted by name."""
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def load_plugins(environ: Mapping[str, str] | None = None, *, forbid_cuda: bool = False) -> list[ModuleType]:
    """Import the built-ins, every ``FEDWEB_PLUGINS`` module and every entry point; importing
    twice is a no-op (Python caches modules). Raises :class:`PluginError` naming the plugin.

    ``forbid_cuda`` is for a process that will fork workers (the Celery parent): a plugin that
    initialises CUDA while it is imported there would make every forked pool child fail ("Cannot
    re-initialize CUDA in forked subprocess"), so it is refused at start-up, by name, instead.
    """
    with _cuda_forbidden() if forbid_cuda else _nothing():
        return _load(environ)


def _load(environ: Mapping[str, str] | None) -> list[ModuleType]:
    registry.ensure_builtins()
    modules = []
    for name in plugin_names(environ):
        modules.append(_import(name, f"{PLUGINS_ENV}: module {name!r}", PLUGINS_ENV))
    for ep in entry_points():
        dist = ep.dist.name if ep.dist is not None else "?"
        where = f"plugin {ep.name!r} (entry point {ep.value!r} of {dist})"
        try:
            loaded = ep.load()
        except Exception as e:  # any failure: a plugin may raise while importing
            raise PluginError(f"{where} failed to import: {type(e).__name__}: {e}") from e
        module = loaded if isinstance(loaded, ModuleType) else importlib.import_module(loaded.__module__)
        registry.note_plugin(module.__name__, f"entry point of {dist}")
        modules.append(module)
    return modules


def _import(name: str, where: str, source: str) -> ModuleType:
    try:
        module = importlib.import_module(name)
    except Exception as e:  # any failure, not only ImportError: a plugin may raise while importing
        raise PluginError(f"{where} failed to import: {type(e).__name__}: {e}") from e
    registry.note_plugin(module.__name__, source)
    return module


class _CudaAtImport(RuntimeError):
    pass


@contextmanager
def _cuda_forbidden() -> Iterator[None]:
    """While imports run, CUDA initialisation (``torch.cuda._lazy_init``, which every CUDA call
    and the first CUDA tensor go through) raises instead of initialising. ``is_available()``
    still answers, through NVML (``PYTORCH_NVML_BASED_CUDA_CHECK``), without creating a context."""

    def refuse() -> None:
        raise _CudaAtImport(
            "it initialises CUDA when imported, which breaks the forked worker processes; "
            "move the CUDA work into the component's function (it runs in the worker process)"
        )

    saved_check = os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK")
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    original = torch.cuda._lazy_init
    torch.cuda._lazy_init = refuse
    try:
        yield
    finally:
        torch.cuda._lazy_init = original
        if saved_check is None:
            os.environ.pop("PYTORCH_NVML_BASED_CUDA_CHECK", None)
        else:
            os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = saved_check


@contextmanager
def _nothing() -> Iterator[None]:
    yield
