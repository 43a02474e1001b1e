"""Sweeps: expand one submission into the specs of its runs, every one checked (``create`` stores them).

A sweep is a base spec, ``axes`` (dotted spec field -> the list of values it takes, ``seed``
among them; a component option as ``model.options.width`` or ``model.options.vgg.width``, and the
old flat names such as ``model.width`` or ``communication.topk_ratio`` still work) and a mode: ``grid`` runs every combination; ``random`` draws ``samples``
configurations from that grid with ``sample_seed`` (the same draw every time) and runs each with
every seed. Every expanded spec passes the same checks as a single experiment; an error names the
field and the point, and nothing is stored unless every point is valid.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
import random
from math import prod
from typing import Any

from django.conf import settings

from fedweb_engine.components import registry
from fedweb_engine.spec import legacy as spec_legacy
from fedweb_engine.spec.components import short_name
from fedweb_engine.spec.schema import COMPONENT_PATHS, Spec, SpecError, spec_fields
from fedweb_engine.spec.validation import each_error
from orchestrator.experiments.launch import checked_spec
from orchestrator.sweeps.models import SEED_FIELD, SWEEP_MODES
from orchestrator.sweeps.sweep_error import SweepError

MAX_ERRORS = 5  # errors reported per field: enough to see the pattern, not a wall of text


def _fail(field: str, message: str) -> SweepError:
    return SweepError({field: [message]})


def check_axes(axes: Any) -> dict[str, list]:
    """The axes as {dotted field: non-empty list of distinct values}, or ``SweepError`` naming the field."""
    if not isinstance(axes, dict) or not axes:
        raise _fail("axes", "axes must map at least one spec field to a list of values")
    checked: dict[str, list] = {}
    for field, values in axes.items():
        if not _targets(field):
            raise _fail("axes", f"axes.{field} is not a spec field")
        if not isinstance(values, list) or not values:
            raise _fail("axes", f"axes.{field} must be a non-empty list of values")
        distinct = list({json.dumps(v, sort_keys=True): v for v in values}.values())
        checked[field] = distinct
    return checked


def configurations(axes: dict[str, list], *, mode: str, samples: int | None, sample_seed: int) -> list[dict]:
    """The configurations (every swept field but the seed), in grid order or as a seeded sample."""
    fields = [f for f in axes if f != SEED_FIELD]
    grid_size = prod(len(axes[f]) for f in fields)
    if mode == "grid":
        indices = range(grid_size)
    elif mode == "random":
        if not samples or samples < 1:
            raise _fail("samples", "samples must be a whole number >= 1 in random mode")
        # Indices, not points: a huge grid is never built, only the drawn points are.
        indices = sorted(random.Random(sample_seed).sample(range(grid_size), min(samples, grid_size)))
    else:
        raise _fail("mode", f"mode must be one of {', '.join(SWEEP_MODES)}, not {mode!r}")
    return [_point(axes, fields, i) for i in indices]


def _point(axes: dict[str, list], fields: list[str], index: int) -> dict:
    # Mixed-radix decoding of a grid index, the last field varying fastest (itertools.product's order).
    point = {}
    for field in reversed(fields):
        index, digit = divmod(index, len(axes[field]))
        point[field] = axes[field][digit]
    return {f: point[f] for f in fields}


def points(axes: dict[str, list], base: dict, *, mode: str, samples: int | None, sample_seed: int) -> list[dict]:
    """Every run of the sweep as {field: value} (seed included), refused over FEDWEB_SWEEP_MAX_RUNS."""
    seeds = axes.get(SEED_FIELD, [base.get(SEED_FIELD, 0)])
    grid_size = prod(len(values) for field, values in axes.items() if field != SEED_FIELD)
    # Counted before anything is built: a sweep of a million points is refused at once.
    runs = (min(samples, grid_size) if mode == "random" and samples else grid_size) * len(seeds)
    limit = settings.FEDWEB_SWEEP_MAX_RUNS
    if runs > limit:
        raise _fail("axes", f"the sweep expands into {runs} runs, over the limit of {limit} (FEDWEB_SWEEP_MAX_RUNS)")
    configs = configurations(axes, mode=mode, samples=samples, sample_seed=sample_seed)
    return [{**config, SEED_FIELD: seed} for config, seed in itertools.product(configs, seeds)]


def is_spec_field(field: str) -> bool:
    """Whether a swept (or ranged) field names a spec field, by any of the names an axis accepts."""
    return bool(_targets(field))


def _targets(field: str) -> list[str]:
    """The dotted paths an axis sets in today's spec shape; [] when it names no spec field."""
    fields = spec_fields()
    if field in fields:
        meta = fields[field]
        return [field.rsplit(".options.", 1)[0] + f".options.{meta['option']}"] if meta.get("option") else [field]
    if field == f"communication.{spec_legacy.OLD_RATIO_KEY}":
        return [f"communication.{link}.options.{spec_legacy.RATIO_OPTION}" for link in spec_legacy.LINKS]
    new = spec_legacy.legacy_field(field)
    if new is not None:
        return _targets(new) or [new]
    path, _, option = field.partition(".options.")
    if path in COMPONENT_PATHS and option and "." not in option:
        if any(f"{path}.options.{c}.{option}" in fields for c in registry.names(COMPONENT_PATHS[path])):
            return [field]
    return []


def with_values(base: dict, point: dict) -> dict:
    """A copy of the spec dict ``base`` (upgraded to today's shape) with each field of ``point``
    set; a point that picks another component leaves out the options that component lacks."""
    # A new sweep, like a new experiment: an old key its component lacks is refused, not dropped.
    # A server-side fedprox is judged with the point applied (its swept μ may make it FedProx).
    spec = spec_legacy.upgrade(copy.deepcopy(base), strict=True, final=False)
    renamed = []
    # Component names first, so that an option axis lands on the component the point selects.
    for field, value in sorted(point.items(), key=lambda item: not item[0].endswith(".name")):
        for dotted in _targets(field) or [field]:
            if dotted.endswith(f".options.{spec_legacy.RATIO_OPTION}") and field.endswith(spec_legacy.OLD_RATIO_KEY):
                if not _has_option(spec, dotted):
                    continue  # the old communication.topk_ratio set only the links using top-k
            _put(spec, dotted, value)
            if dotted == "algorithm.name":
                spec["algorithm"].pop("server_optimizer", None)  # derived from the name
            if dotted.endswith(".name") and dotted[: -len(".name")] in COMPONENT_PATHS:
                renamed.append(dotted[: -len(".name")])
    for path in renamed:
        section = _get(spec, path)
        if isinstance(section.get("options"), dict):
            known = _option_names(path, section.get("name"))
            section["options"] = {k: v for k, v in section["options"].items() if k in known}
    return spec


def _option_names(path: str, name) -> set[str]:
    try:
        component = registry.get(COMPONENT_PATHS[path], name)
    except (registry.UnknownComponent, TypeError):
        return set()
    return {f.name for f in dataclasses.fields(component.options)}


def _has_option(spec: dict, dotted: str) -> bool:
    path, _, option = dotted.partition(".options.")
    section = _get(spec, path)
    return option in _option_names(path, section.get("name", _get(Spec().to_dict(), path)["name"]))


def _get(spec: dict, path: str) -> dict:
    for part in path.split("."):
        value = spec.get(part)
        if not isinstance(value, dict):
            value = spec[part] = {} if value is None else {"name": value}
        spec = value
    return spec


def _put(spec: dict, dotted: str, value) -> None:
    parent, _, last = dotted.rpartition(".")
    (_get(spec, parent) if parent else spec)[last] = value


def describe(point: dict) -> str:
    """``mu=0.01 seed=1``: a point as its runs are named."""
    return " ".join(f"{short_name(field)}={json.dumps(value)}" for field, value in point.items())


def range_errors(base: dict, ranges: dict[str, dict], seed) -> dict[str, list[str]]:
    """A TPE search's ranges tried against the base spec at their ends (and every choice), so that a
    range the spec refuses (``local.lr`` from 0) is reported now, under ``ranges.<field>``."""
    errors: dict[str, list[str]] = {}
    for field, r in ranges.items():
        ends = r["choices"] if r["type"] == "choice" else [r["low"], r["high"]]
        for value in ends:
            try:
                checked_spec(with_values(base, {field: value, SEED_FIELD: seed}))
            except SpecError as e:
                messages = errors.setdefault(f"ranges.{field}", [])
                if len(messages) < MAX_ERRORS:
                    messages.append(f"ranges.{field} at {json.dumps(value)}: {e}")
    return errors


def expand(base: Any, axes: Any, *, mode: str = "grid", samples: int | None = None, sample_seed: int = 0):
    """[(point, Spec)] for every run, or ``SweepError``: spec errors are keyed ``spec.<field>`` and
    name the point (``spec.algorithm.mu: point mu=-1 seed=0: algorithm.mu must be >= 0``)."""
    if not isinstance(base, dict):
        raise _fail("spec", "spec must be a JSON object")
    axes = check_axes(axes)
    errors: dict[str, list[str]] = {}
    runs = []
    for point in points(axes, base, mode=mode, samples=samples, sample_seed=sample_seed):
        try:
            spec = checked_spec(with_values(base, point))
        except SpecError as error:
            for e in each_error(error):  # every bad field of the point, not only its first
                messages = errors.setdefault(f"spec.{e.field}", [])
                if len(messages) < MAX_ERRORS:
                    messages.append(f"point {describe(point)}: {e}")
            continue
        runs.append((point, spec))
    if errors:
        raise SweepError(errors)
    return runs
