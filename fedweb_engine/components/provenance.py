"""Which plugins an experiment depends on, and whether a worker has them.

An experiment records, when it is created, the provenance (plugin, version, source hash) of the
plugin components its spec names, so that its rounds run only where that same code is loaded:
a worker with another version of the plugin would run a different experiment under the same
name. The scheduler (``orchestrator.fleet.scheduling``) and the round task (``workers.tasks``) both
decide with :func:`missing`, so they can never disagree about what "has the plugin" means.

The rule: a worker has a recorded plugin when it loaded a plugin of that name whose source hash
is the recorded one. The version is not compared when both hashes are known (the same source
is the same code, whatever a package's metadata says); it decides only when the plugin has no
source files to hash. Plain engine code: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fedweb_engine.components import registry


def _get(section: Any, key: str) -> Any:
    if isinstance(section, Mapping):
        return section.get(key)
    return getattr(section, key, None)


def _name(value: Any) -> str | None:
    """A component's name from a spec value: a plain name (today's flat spec) or an object with
    ``name`` (the component shape ``{"name": ..., "options": {...}}``)."""
    if isinstance(value, str):
        return value or None
    name = _get(value, "name")
    return name if isinstance(name, str) and name else None


def components_used(spec: Any) -> dict[str, list[str]]:
    """``{kind: [names]}`` of the components a spec names: its model, its dataset, its
    algorithm (the strategy) and both codecs. Reads a stored spec dict or a typed ``Spec``, in
    the flat shape (``data.dataset``, ``communication.uplink: "fp32"``) or the component shape
    (``data.name``, ``communication.uplink: {"name": "fp32", "options": {}}``)."""
    data = _get(spec, "data")
    communication = _get(spec, "communication")
    found = {
        "model": [_name(_get(spec, "model"))],
        "dataset": [_name(_get(data, "name")) or _name(_get(data, "dataset"))],
        "strategy": [_name(_get(spec, "algorithm"))],
        "algorithm": [_name(_get(_get(spec, "algorithm"), "client"))],  # the client algorithm
        "codec": [_name(_get(communication, "uplink")), _name(_get(communication, "downlink"))],
    }
    return {kind: list(dict.fromkeys(n for n in names if n)) for kind, names in found.items() if any(names)}


def spec_provenance(spec: Any) -> list[dict[str, Any]]:
    """What an experiment records as its ``plugins``: :func:`registry.spec_plugins` of the
    components it uses. Names the registry does not list are left out: the spec validator is
    the one that rejects an unknown name, and a built-in that is not (yet) registered needs no
    provenance."""
    used = {kind: [n for n in names if n in registry.names(kind)] for kind, names in components_used(spec).items()}
    return registry.spec_plugins(used)


def label(plugin: Mapping[str, Any]) -> str:
    """``"X 1.2.0"``, or ``"X <hash>"`` for a plugin that is not an installed package."""
    name = plugin.get("plugin") or plugin.get("name")
    version = plugin.get("version") or plugin.get("hash") or "(unversioned)"
    return f"{name} {version}"


def required(recorded: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The distinct plugins (``{"plugin", "version", "hash"}``) behind recorded components, in order."""
    out: dict[tuple, dict[str, Any]] = {}
    for p in recorded or []:
        key = (p.get("plugin"), p.get("hash"), p.get("version"))
        out.setdefault(key, {"plugin": p.get("plugin"), "version": p.get("version"), "hash": p.get("hash")})
    return list(out.values())


def has_plugin(installed: Iterable[Mapping[str, Any]], need: Mapping[str, Any]) -> bool:
    """Does a process whose ``installed_plugins()`` is ``installed`` have plugin ``need``?"""
    for p in installed or []:
        if p.get("name") != need.get("plugin"):
            continue
        if need.get("hash") is not None or p.get("hash") is not None:
            return p.get("hash") == need.get("hash")
        return p.get("version") == need.get("version")
    return False


def missing(recorded: Iterable[Mapping[str, Any]], installed: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The recorded plugins a process with ``installed`` lacks (or has with other source)."""
    installed = list(installed or [])
    return [need for need in required(recorded) if not has_plugin(installed, need)]
