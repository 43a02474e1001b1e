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
from pathlib import Path

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
    "capacity": "estimates.capacity",
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
    "data.base": "data.federated",  # FederatedData: every client's samples in one tensor
}
PREFIX = __name__ + "."


def new_name(old: str) -> str:
    """The new dotted name of an old ``workers.engine...`` module."""
    relative = old.removeprefix(PREFIX)
    head, _, rest = relative.partition(".")
    if relative in MOVED:
        return "fedweb_engine." + MOVED[relative]
    if head == "data" and rest and _is_dataset_module(rest.partition(".")[0]):
        return "fedweb_engine.data.datasets." + rest  # the built-in datasets went one level down
    return "fedweb_engine." + MOVED.get(head, head) + ("." + rest if rest else "")


def _is_dataset_module(name: str) -> bool:
    """Whether ``fedweb_engine/data/datasets/<name>.py`` exists (found without importing torch)."""
    engine = importlib.util.find_spec("fedweb_engine")
    folders = engine.submodule_search_locations if engine is not None else None
    return bool(folders) and (Path(folders[0]) / "data" / "datasets" / f"{name}.py").is_file()


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
