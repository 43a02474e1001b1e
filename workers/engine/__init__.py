"""Deprecated home of the engine, which is now the top-level package :mod:`fedweb_engine`.

Plugins written against the old paths (``workers.engine.registry`` and its decorators, as the plugin
guide used to show) keep working for one release: importing any ``workers.engine.<module>`` gives the
very module object of its new home (so a component registered through an old path lands in the one
registry) and warns with a ``DeprecationWarning`` naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# Old module (under workers.engine) -> its new place under fedweb_engine. Subpackages that kept their
# name (data, models, strategies, algorithms) map to themselves.
MOVED = {
    "spec": "spec.schema",
    "spec_components": "spec.components",
    "spec_legacy": "spec.legacy",
    "validation": "spec.validation",
    "fields": "spec.fields",
    "presets": "spec.presets",
    "registry": "components.registry",
    "plugins": "components.plugins",
    "plugin_sources": "components.plugin_sources",
    "provenance": "components.provenance",
    "builtins": "components.builtins",
    "option_checks": "components.option_checks",
    "client": "training.client",
    "training": "training.dispatch",
    "plan": "training.plan",
    "flat": "training.flat",
    "vectorise": "training.vectorise",
    "vmap_probe": "training.vmap_probe",
    "losses": "training.losses",
    "capacity": "training.capacity",
    "devices": "training.devices",
    "evaluation": "training.evaluation",
    "round_state": "state.round_state",
    "client_state": "state.client_rows",
    "client_states": "state.client_state",
    "sparse_files": "state.sparse_files",
    "checkpoint": "state.checkpoint",
    "runner": "simulation.runner",
    "simulation_state": "simulation.algorithm_share",
    "codecs": "communication.codecs",
    "codec_components": "communication.codec_options",
    "privacy": "privacy.mechanism",
    "probes": "probes.memory",
    "progress": "progress_bar",
    "isolation": "isolation.parent",
    "isolation_child": "isolation.child",
    "result": "results.round_result",
    "round_fields": "results.round_fields",
}
PREFIX = __name__ + "."


def new_name(old: str) -> str:
    """The new dotted name of an old ``workers.engine...`` module."""
    head, _, rest = old.removeprefix(PREFIX).partition(".")
    return "fedweb_engine." + MOVED.get(head, head) + ("." + rest if rest else "")


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``workers.engine.<module>`` to the same module object under ``fedweb_engine``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(PREFIX) and fullname != PREFIX + "__main__":
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = new_name(spec.name)
        warnings.warn(f"{spec.name} moved to {new}: import it from there", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:
        """Nothing to run: the module was imported under its new name."""


if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
    sys.meta_path.insert(0, _OldPaths())

warnings.warn("workers.engine moved to fedweb_engine: import it from there", DeprecationWarning, stacklevel=2)


def __getattr__(name: str):
    return getattr(importlib.import_module("fedweb_engine"), name)
