"""The spec validator: JSON values checked and coerced into frozen dataclasses, by field metadata.

Generic over the schema: it reads each dataclass field's type and ``metadata`` and knows nothing
of what the fields mean, so :mod:`fedweb_engine.spec.schema` (the schema) can call it without an
import loop. The metadata keys it reads, all optional:

``choices`` (allowed values), ``min``/``max`` (inclusive bounds; ``min_open`` makes ``min``
exclusive), ``nullable`` (``None`` allowed), ``max_length`` (of a string or a list), ``help``,
``kind`` (a kind of :mod:`fedweb_engine.components.registry`: the value names a registered component,
read at validation time so a plugin loaded later is accepted) and ``options_of`` (on a field
named ``options``: the options dataclass of the component its sibling ``name`` selects).

A field whose ``default_factory`` is a dataclass is a section: a nested JSON object validated
the same way. Every error is a :class:`SpecError` whose message starts with the field's dotted
name (``data.alpha must be > 0``), so forms and the API can put it next to the right input. Every
bad field of an object is reported at once (:class:`SpecErrors`, one error per field): whoever
wrote the spec learns all of them from one submit, not one per submit.

Hand-written rather than pydantic: the dotted messages, the JSON number rules (3.0 is an
integer, ``true`` is not, 1e400 is not a number) and the bounds-off path for stored specs would
each need custom code on top of pydantic, and the engine keeps its dependencies to PyTorch/NumPy.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any

from fedweb_engine.spec.fields import meta as field_meta


class SpecError(ValueError):
    """An invalid spec. ``field`` is the dotted path of the offending field; ``related``, for a rule
    between fields, the others it ties (changing any of them may resolve it)."""

    def __init__(self, field: str, message: str, *, related: tuple[str, ...] = ()):
        super().__init__(f"{field} {message}")
        self.field = field
        self.message = message
        self.related = related

    def __reduce__(self):  # pickles (the estimates helper's pipe, a worker's result) with its field
        return (type(self), (self.field, self.message), self.__dict__)


class SpecErrors(SpecError):
    """Several invalid fields: ``errors`` holds one :class:`SpecError` per field, in spec order. It
    reads as its first error (``field``, ``message``) for a caller that shows one; ``str`` lists all."""

    def __init__(self, errors: list[SpecError]):
        super().__init__(errors[0].field, errors[0].message)
        self.errors = errors
        self.args = ("; ".join(str(e) for e in errors),)

    def __reduce__(self):
        return (type(self), (self.errors,), self.__dict__)


def each_error(e: SpecError) -> list[SpecError]:
    """The single errors that ``e`` stands for (itself, or every one a :class:`SpecErrors` holds)."""
    return list(e.errors) if isinstance(e, SpecErrors) else [e]


def raise_all(errors: list[SpecError]) -> None:
    """Raise ``errors`` (one as itself, several as :class:`SpecErrors`); nothing when empty."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise SpecErrors(errors)


MAX_REPORTED = 50  # errors kept per spec: a hostile body of 10,000 bad keys gets an answer of bounded size


class Collect:
    """Gathers the errors of independent checks: ``with collect: check()`` records a
    :class:`SpecError` instead of stopping at it; :meth:`done` raises them all."""

    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def __enter__(self) -> Collect:
        return self

    def __exit__(self, kind, value, tb) -> bool:
        if isinstance(value, SpecError):
            room = MAX_REPORTED - len(self.errors)
            self.errors.extend(each_error(value)[: max(room, 0)])
            return True
        return False

    def done(self) -> None:
        raise_all(self.errors)

    def __reduce__(self):  # pickled as what it was built from (it crosses from the estimates helper)
        return type(self), (self.field, self.message)


def build(cls: type, d: dict[str, Any], *, bounds: bool, prefix: str = "", component: str = "") -> Any:
    """Validate the JSON object ``d`` into an instance of dataclass ``cls``; missing fields take
    their defaults. ``prefix`` is prepended to field names in errors (``"data."``); ``component``
    (``"model 'mlp'"``) says whose options ``cls`` holds, for the message on an unknown key.

    ``bounds=False`` skips numeric ranges and lengths (types and choices still apply). Every bad
    field is reported, not only the first (:class:`SpecErrors`).
    """
    collect = Collect()
    for key in d:
        with collect:
            _refuse_unknown_key(cls, d, key, prefix, component)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        with collect:
            _build_field(f, d, kwargs, cls, bounds=bounds, prefix=prefix, failed=collect.errors)
    collect.done()
    return cls(**kwargs)


def _build_field(
    f: dataclasses.Field, d: dict, kwargs: dict, cls: type, *, bounds: bool, prefix: str, failed: list
) -> None:
    section = section_of(f)
    if f.metadata.get("options_of"):
        if any(e.field == f"{prefix}name" for e in failed):
            return  # options of a component that could not be named: judged once the name is right
        sub = d.get(f.name, {})
        if not isinstance(sub, dict):
            raise SpecError(f"{prefix}{f.name}", "must be an object")
        kind, name = f.metadata["options_of"], kwargs.get("name", _default_name(cls))
        options = component_of(kind, name).options
        kwargs[f.name] = build(
            options, sub, bounds=bounds, prefix=f"{prefix}{f.name}.", component=f"{kind} {name[:40]!r}"
        )
    elif section is not None:
        sub = d.get(f.name, {})
        if not isinstance(sub, dict):
            raise SpecError(f"{prefix}{f.name}", "must be an object")
        kwargs[f.name] = build(section, sub, bounds=bounds, prefix=f"{prefix}{f.name}.")
    elif f.name in d:
        kwargs[f.name] = coerce(f, d[f.name], f"{prefix}{f.name}", bounds)


def _refuse_unknown_key(cls: type, d: dict[str, Any], key: str, prefix: str, component: str) -> None:
    # Every message lists what the object does accept: a key that is silently ignored would give
    # a run other than the one asked for, so the writer must learn the real names.
    known = [f.name for f in dataclasses.fields(cls)]
    if key not in known:
        if component:
            raise SpecError(f"{prefix}{key}", f"is not a known field: {component} has the options {_listed(known)}")
        options_field = next((f for f in dataclasses.fields(cls) if f.metadata.get("options_of")), None)
        if options_field is not None:  # a component section: the key may be an option of its component
            kind = options_field.metadata["options_of"]
            name = d.get("name", _default_name(cls))
            if isinstance(name, str) and name in component_names(kind):
                own = [f.name for f in dataclasses.fields(component_of(kind, name).options)]
                raise SpecError(
                    f"{prefix}{key}",
                    f"is not a known field; {kind} {name[:40]!r} has the options {_listed(own)} (in {prefix}options)",
                )
        raise SpecError(
            f"{prefix}{key}", f"is not a known field: {prefix.rstrip('.') or 'a spec'} has {_listed(known)}"
        )


def _listed(names: list[str]) -> str:
    return ", ".join(names) if names else "none"


# The component registry (fedweb_engine.components.registry), which hands itself over when it loads: it sits
# above this module (it checks its components' options with ``coerce``), so this module never
# imports it. The package's __init__ imports the spec, and so the registry, before any validation.
_registry = None


def use_registry(registry) -> None:
    """Called by :mod:`fedweb_engine.components.registry` once, as it loads."""
    global _registry
    _registry = registry


def component_of(kind: str, name: str):
    """The registered component ``name`` of ``kind``."""
    return _registry.get(kind, name)


def component_names(kind: str) -> tuple[str, ...]:
    return _registry.names(kind)


def _default_name(cls: type) -> str:
    return next(f.default for f in dataclasses.fields(cls) if f.name == "name")


def section_of(f: dataclasses.Field) -> type | None:
    """The dataclass of a section field (one built by ``default_factory=SomeDataclass``), else None."""
    factory = f.default_factory
    return factory if isinstance(factory, type) and dataclasses.is_dataclass(factory) else None


def coerce(f: dataclasses.Field, value: Any, name: str, bounds: bool = True) -> Any:
    """Check ``value`` against the field's type and metadata; return the domain value."""
    meta = f.metadata
    if value is None:
        if meta.get("nullable"):
            return None
        raise SpecError(name, "must not be null")
    kind = kind_of(f)
    if kind is bool:
        if not isinstance(value, bool):
            raise SpecError(name, "must be true or false")
    elif kind is int:
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, float) and value.is_integer())):
            raise SpecError(name, "must be an integer")
        value = int(value)
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
            raise SpecError(name, "must be a number")
        value = float(value)
    elif kind is str:
        if not isinstance(value, str):
            raise SpecError(name, "must be a string")
        if meta.get("kind") and value not in component_names(meta["kind"]):
            known = ", ".join(component_names(meta["kind"]))
            raise SpecError(name, f"must be a registered {meta['kind']} ({known}), not {value[:40]!r}")
    elif kind is list:
        if not isinstance(value, list) or not value:
            raise SpecError(name, "must be a non-empty list of integers")
        _check_length(meta, value, name, bounds)
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int):
                raise SpecError(name, "must be a non-empty list of integers")
        return list(value)
    _check_length(meta, value, name, bounds and kind is str)
    _check_range(meta, value, name, bounds)
    return value


_KINDS = (("bool", bool), ("list", list), ("int", int), ("float", float), ("str", str))


def kind_of(f: dataclasses.Field) -> type:
    """The JSON kind of a field (bool, list, int, float or str), from its annotation: a string
    (``from __future__ import annotations``) or a real type (a plugin's ``int``, ``str | None``)."""
    t = f.type
    if not isinstance(t, str):
        if typing.get_origin(t) in (typing.Union, types.UnionType):
            t = next(a for a in typing.get_args(t) if a is not type(None))
        t = typing.get_origin(t) or t
        for _, kind in _KINDS:
            if t is kind:
                return kind
        raise TypeError(f"unsupported spec field type {f.type!r}")
    for name, kind in _KINDS:
        if t.startswith(name):
            return kind
    raise TypeError(f"unsupported spec field type {t}")


def describe_fields(cls: type) -> dict[str, dict[str, Any]]:
    """Every field's metadata, default and JSON kind, keyed by dotted name, sections flattened.

    A component's ``name`` gets the registered names as choices; its ``options`` become one entry
    per component and option, ``<path>.options.<component>.<option>``, that applies when
    ``<path>.name`` selects the component (and carries ``component`` and ``option``).
    """
    return _describe(cls, dataclasses.asdict(cls()), "")


def _describe(cls: type, defaults: dict[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for f in dataclasses.fields(cls):
        section = section_of(f)
        if f.metadata.get("options_of"):
            out.update(describe_options(f.metadata["options_of"], prefix.rstrip(".")))
        elif section is not None:
            out.update(_describe(section, defaults[f.name], f"{prefix}{f.name}."))
        else:
            meta = {**f.metadata, "default": defaults[f.name], "type": kind_of(f).__name__}
            if meta.get("kind"):
                meta["choices"] = component_names(meta["kind"])
            out[f"{prefix}{f.name}"] = meta
    return out


def describe_options(kind: str, path: str) -> dict[str, dict[str, Any]]:
    """The option entries of every registered component of ``kind`` selected at ``path``."""
    out: dict[str, dict[str, Any]] = {}
    for component in _registry.components(kind):
        selected = {f"{path}.name": [component.name]}
        defaults = dataclasses.asdict(component.options())
        for f in dataclasses.fields(component.options):
            own = f.metadata.get("applies_when")
            rule = [{**selected, **alt} for alt in own] if own else [selected]
            out[f"{path}.options.{component.name}.{f.name}"] = {
                **field_meta(""),
                **f.metadata,
                "default": defaults[f.name],
                "type": kind_of(f).__name__,
                "applies_when": rule,
                "component": component.name,
                "option": f.name,
            }
    return out


def _check_length(meta: Any, value: Any, name: str, bounds: bool) -> None:
    # Checked before anything walks the value, so a huge list or string costs nothing more.
    limit = meta.get("max_length")
    if bounds and limit is not None and len(value) > limit:
        raise SpecError(
            name, f"is too long: at most {limit:,} {'entries' if isinstance(value, list) else 'characters'}"
        )


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond any float (10**400)
        return False


def _check_range(meta: Any, value: Any, name: str, bounds: bool = True) -> None:
    choices = meta.get("choices")
    if choices is not None and value not in choices:
        raise SpecError(name, f"must be one of {', '.join(map(str, choices))}, not {str(value)[:40]!r}")
    if not bounds:
        return
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None:
        if meta.get("min_open") and not value > lo:
            raise SpecError(name, f"must be > {lo}")
        if not meta.get("min_open") and value < lo:
            raise SpecError(name, f"must be >= {lo}")
    if hi is not None and value > hi:
        raise SpecError(name, f"must be <= {hi}")
