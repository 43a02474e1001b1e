"""The component registry: one registry per extension kind, keyed by name.

FedWeb's models, datasets, server strategies and codecs are *components*. The built-ins and a
team's plugins register the same way, with a decorator from this module::

    from dataclasses import dataclass
    from fedweb_engine.components import registry
    from fedweb_engine.components.registry import option

    @dataclass(frozen=True)
    class WideOptions:
        width: int = option(16, "Channels of the first block.", min=1, max=512)

    @registry.model("wide_cnn", WideOptions)
    def wide_cnn(input_shape, num_classes, options):
        return MyNet(input_shape, num_classes, options.width)

The contract per kind (the public API; keep these signatures):

``model(name, options=None, *, task="classification", vmappable=None)``
    ``fn(input_shape: tuple[int, ...], num_classes: int, options) -> torch.nn.Module`` returning
    logits. ``task="lm"`` models take int64 tokens and pair only with ``task="lm"`` datasets.
    ``vmappable=None`` lets the engine find out (it falls back to sequential training with the
    reason in the experiment's log when ``torch.func.vmap`` cannot run the model).
``dataset(name, options=None, *, task="classification", natural=False, describe=None, context=False)``
    ``fn(options, rng: numpy.random.Generator) -> Pool`` (``fedweb_engine.data.pool.Pool``).
    A pool without a test set (``x_test is None``) gets ``data.test_fraction`` held out by the
    engine. ``natural=True``: the pool carries writer ids, so ``partition: natural`` works.
    ``describe(options) -> DatasetShape`` tells the capacity check the size without loading;
    without it the engine loads the dataset once to find out. ``context=True`` (built-ins) calls
    ``fn(options, rng, context)`` with a :class:`DataContext` (and ``describe(options, context)``).
``strategy(name, options=None, *, needs_updates=False, server_optimizer="sgd", moments=0)``
    ``fn(*, num_params, device, lr, options)`` returning an object with
    ``step(global_flat, avg_update)`` (the streaming weighted average, memory flat) or, with
    ``needs_updates=True``, ``step(global_flat, updates, weights)`` where ``updates`` is the
    round's ``[clients, params]`` tensor. ``state_dict()``/``load_state_dict()`` carry its
    buffers through checkpoints (subclass ``fedweb_engine.strategies.FedAvg`` to get them).
    ``moments`` is how many P-sized buffers it keeps (the capacity estimate counts them).
``algorithm(name, options=None)``
    A client algorithm (what clients do in local training, beside the server's strategy): a
    subclass of ``fedweb_engine.algorithms.ClientAlgorithm`` (or a function returning one),
    called as ``fn(*, num_params, device, lr, options)``. Its hooks work on the engine's flat
    ``[G, P]`` tensors: see :mod:`fedweb_engine.algorithms.base` and docs/plugins.md.
``codec(name, options=None, *, codec_id)``
    ``fn(layout: list[int], options) -> fedweb_engine.communication.codecs.Codec``; ``codec_id`` (1..255,
    unique) is the byte that names the codec in the wire header.

Options are a frozen dataclass whose fields have defaults; :func:`option` attaches the same
metadata spec fields carry (help, min/max, choices, ``path=True`` for a file under the datasets
folder), so the spec validator, the web form and the API schema read them like any other field.

Discovery is in :mod:`fedweb_engine.components.plugins` (``FEDWEB_PLUGINS`` and the ``fedweb.plugins``
entry-point group); this module only keeps what was registered and where it came from.
This module is the only place that lists component names: every other list is read from here.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import inspect
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedweb_engine.components.option_checks import OptionMetadataError, check_options
from fedweb_engine.components.plugin_sources import distribution_version, hash_files
from fedweb_engine.spec import validation
from fedweb_engine.spec.fields import spec_field

KINDS = ("model", "dataset", "strategy", "codec", "algorithm")
BUILTIN_PACKAGE = "fedweb_engine"
# Imported (once) before the registry is first read: they register the built-ins.
_BUILTIN_MODULES = ("fedweb_engine.components.builtins",)


class RegistryError(ValueError):
    """A registration that cannot be accepted (a duplicate name, options that are not a frozen dataclass)."""


class UnknownComponent(LookupError):
    """No component of this kind has this name."""

    def __init__(self, kind: str, name: str, known: tuple[str, ...]):
        super().__init__(f"unknown {kind} {name!r}; registered: {', '.join(known) or 'none'}")
        self.kind, self.name, self.known = kind, name, known


def option(default, help: str, **kw):
    """A field of a component's options dataclass: its default, help text and constraints.

    The keyword arguments are those of spec fields (``min``, ``max``, ``min_open``, ``choices``,
    ``nullable``, ``max_length``, ``advanced``, ``applies_when``), plus ``path=True`` for a file
    or folder under the server's datasets folder (checked as ``data.options.<field>``).
    """
    return spec_field(default, help, **kw)


@dataclass(frozen=True)
class NoOptions:
    """The options of a component that has none."""


@dataclass(frozen=True)
class DatasetShape:
    """What the capacity check needs to know of a dataset without loading it."""

    input_shape: tuple[int, ...]  # one sample, no batch dimension ((T,) for token sequences)
    num_classes: int  # classes, or the vocabulary for task "lm"
    train_samples: int  # training rows (an estimate is fine: it sizes memory, not results)
    sample_bytes: int  # stored bytes of one sample and its label


@dataclass(frozen=True)
class DataContext:
    """What built-in loaders registered with ``context=True`` get besides their options."""

    test_fraction: float
    data_root: Path | None
    num_clients: int
    partition: str = "iid"  # added: a natural split of file datasets reads only num_clients writers


@dataclass(frozen=True)
class Component:
    """One registered model, dataset, strategy or codec."""

    kind: str
    name: str
    factory: Callable[..., Any]
    options: type
    traits: Mapping[str, Any] = field(default_factory=dict)
    help: str = ""

    @property
    def module(self) -> str:
        return self.factory.__module__

    @property
    def builtin(self) -> bool:
        return self.module == BUILTIN_PACKAGE or self.module.startswith(BUILTIN_PACKAGE + ".")

    @property
    def plugin(self) -> str | None:
        """The plugin (top-level module) that registered it; None for a built-in."""
        return None if self.builtin else plugin_of(self.module)

    def provenance(self) -> dict[str, Any]:
        """``{"kind", "name", "plugin", "version", "hash"}``: what an experiment records of a
        plugin component it uses (version is None when the plugin is not an installed package)."""
        info = plugin_info(self.plugin) if self.plugin else {"version": None, "hash": None}
        return {"kind": self.kind, "name": self.name, "plugin": self.plugin, **info}

    def default_options(self) -> Any:
        return self.options()


_lock = threading.RLock()
_registry: dict[str, dict[str, Component]] = {kind: {} for kind in KINDS}
_builtins_loaded = False


def _register(kind: str, name: str, options: type | None, traits: dict[str, Any]) -> Callable:
    if not isinstance(name, str) or not name or not name.replace("_", "").replace("-", "").isalnum():
        raise RegistryError(f"{kind} name must be letters, digits, '_' or '-', not {name!r}")
    opts = NoOptions if options is None else options
    if not (isinstance(opts, type) and dataclasses.is_dataclass(opts) and opts.__dataclass_params__.frozen):
        raise RegistryError(f"{kind} {name!r}: options must be a frozen dataclass, not {opts!r}")
    try:
        opts()
    except TypeError as e:
        raise RegistryError(f"{kind} {name!r}: every option needs a default ({e})") from None
    try:
        check_options(f"{kind} {name!r}", opts)
    except OptionMetadataError as e:
        raise RegistryError(str(e)) from None

    def decorate(factory: Callable) -> Callable:
        doc = inspect.getdoc(factory) or ""
        component = Component(kind, name, factory, opts, dict(traits), doc.split("\n\n")[0].replace("\n", " "))
        with _lock:
            existing = _registry[kind].get(name)
            if existing is not None and _same_definition(existing, component):
                _registry[kind][name] = component  # a module imported twice (reload): the same thing
                return factory
            if existing is not None:
                raise RegistryError(
                    f"{kind} {name!r} is already registered by {existing.module}; {component.module} "
                    "must pick another name"
                )
            if kind == "codec":
                _check_codec_id(name, traits.get("codec_id"))
            _registry[kind][name] = component
        return factory

    return decorate


def _same_definition(a: Component, b: Component) -> bool:
    return a.module == b.module and getattr(a.factory, "__qualname__", None) == getattr(b.factory, "__qualname__", None)


def _check_codec_id(name: str, codec_id: Any) -> None:
    if not isinstance(codec_id, int) or isinstance(codec_id, bool) or not 1 <= codec_id <= 255:
        raise RegistryError(f"codec {name!r}: codec_id must be an integer from 1 to 255, not {codec_id!r}")
    for other in _registry["codec"].values():
        if other.traits.get("codec_id") == codec_id and other.name != name:
            raise RegistryError(f"codec {name!r}: codec_id {codec_id} is already used by {other.name!r}")


# -- the decorators (the public contract) -------------------------------------------------


def model(name: str, options: type | None = None, *, task: str = "classification", vmappable: bool | None = None):
    """Register ``fn(input_shape, num_classes, options) -> nn.Module`` as model ``name``."""
    if task not in ("classification", "lm"):
        raise RegistryError(f"model {name!r}: task must be 'classification' or 'lm', not {task!r}")
    return _register("model", name, options, {"task": task, "vmappable": vmappable})


def dataset(
    name: str,
    options: type | None = None,
    *,
    task: str = "classification",
    natural: bool = False,
    describe: Callable[[Any], DatasetShape] | None = None,
    context: bool = False,
):
    """Register ``fn(options, rng) -> Pool`` as dataset ``name``."""
    if task not in ("classification", "lm"):
        raise RegistryError(f"dataset {name!r}: task must be 'classification' or 'lm', not {task!r}")
    return _register(
        "dataset", name, options, {"task": task, "natural": natural, "describe": describe, "context": context}
    )


def strategy(
    name: str,
    options: type | None = None,
    *,
    needs_updates: bool = False,
    server_optimizer: str = "sgd",
    moments: int = 0,
):
    """Register ``fn(*, num_params, device, lr, options)`` (a class or a function) as strategy ``name``."""
    return _register(
        "strategy",
        name,
        options,
        {"needs_updates": needs_updates, "server_optimizer": server_optimizer, "moments": moments},
    )


def codec(name: str, options: type | None = None, *, codec_id: int | None = None):
    """Register ``fn(layout, options) -> Codec`` as codec ``name``, named on the wire by ``codec_id``."""
    return _register("codec", name, options, {"codec_id": codec_id})


def algorithm(name: str, options: type | None = None):
    """Register ``fn(*, num_params, device, lr, options) -> ClientAlgorithm`` as client algorithm ``name``."""
    return _register("algorithm", name, options, {})


# -- reading the registry ---------------------------------------------------------------------


def ensure_builtins() -> None:
    """Import the modules that register the built-ins (once, on first use)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    with _lock:
        if not _builtins_loaded:
            for module in _BUILTIN_MODULES:
                importlib.import_module(module)
            _builtins_loaded = True


def get(kind: str, name: str) -> Component:
    """The component ``name`` of ``kind``, or :class:`UnknownComponent`."""
    ensure_builtins()
    try:
        return _registry[kind][name]
    except KeyError:
        if kind not in _registry:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}") from None
        raise UnknownComponent(kind, name, names(kind)) from None


def names(kind: str) -> tuple[str, ...]:
    """Registered names of ``kind``: built-ins first (in registration order), then plugins."""
    return tuple(c.name for c in components(kind))


def components(kind: str) -> list[Component]:
    ensure_builtins()
    items = list(_registry[kind].values())
    return [c for c in items if c.builtin] + [c for c in items if not c.builtin]


def unregister(kind: str, name: str) -> None:
    """Remove a component (tests, and a plugin's own reload); unknown names are ignored."""
    with _lock:
        _registry[kind].pop(name, None)


# -- provenance: which plugin, which version, which source ------------------------------------

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


def installed_plugins() -> list[dict[str, Any]]:
    """Every plugin this process has components from: name, version, hash and its components
    (``"model:wide_cnn"``), sorted by name. A worker reports this in its heartbeat."""
    ensure_builtins()
    by_plugin: dict[str, list[str]] = {}
    for kind in KINDS:
        for c in _registry[kind].values():
            if not c.builtin:
                by_plugin.setdefault(c.plugin, []).append(f"{kind}:{c.name}")
    return [
        {"name": name, **plugin_info(name), "components": sorted(items)} for name, items in sorted(by_plugin.items())
    ]


def spec_plugins(used: Mapping[str, str]) -> list[dict[str, Any]]:
    """Provenance of the plugin components among ``used`` ({kind: name}, or {kind: [names]});
    built-ins are left out (they come with FedWeb's own version)."""
    out = []
    for kind, value in used.items():
        for name in [value] if isinstance(value, str) else value:
            c = get(kind, name)
            if not c.builtin:
                out.append(c.provenance())
    return sorted(out, key=lambda p: (p["kind"], p["name"]))


validation.use_registry(sys.modules[__name__])  # validation sits below the registry: it is handed it
