"""A search's settings, as the form and the API give them, checked in one place: every bad field is
reported at once (``SweepError``, keyed by field: ``eta``, ``ranges.local.lr``...), nothing is stored.

- ``stopping``: ``none``, ``asha`` (successive halving over rounds: rungs at ``first_rung`` rounds,
  then each ``eta`` times more) or ``median`` (from ``first_rung`` rounds on, every ``first_rung`` rounds);
- ``last_k``: a configuration's value at a round is the mean over its seeds of the mean of its last
  ``last_k`` evaluated rounds up to there (FL metrics are noisy: client sampling, DP noise);
- ``target`` and ``direction``: a numeric round field (``test_accuracy`` by default) or
  ``custom:<name>``, a custom metric of the runs; ``maximize`` or ``minimize`` (by default: maximize
  an accuracy, minimize anything else);
- TPE (``mode: tpe``): ``ranges`` {field: range} instead of lists, and a ``budget`` of configurations.
  A range is ``{"low", "high"}`` (linear), with ``"log": true`` (log), ``"type": "int"`` (whole
  numbers, linear or log) or ``{"type": "choice", "choices": [...]}``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fedweb_engine.results import round_fields
from orchestrator.sweeps.errors import SweepError

DIRECTIONS = ("maximize", "minimize")
RANGE_TYPES = ("float", "int", "choice")
CUSTOM_PREFIX = "custom:"
DEFAULTS = {"first_rung": 3, "eta": 3, "last_k": 3, "target": "test_accuracy"}
OPTION_KEYS = ("first_rung", "eta", "last_k", "target", "direction", "budget", "ranges")
MAX_RANGES = 20


@dataclass(frozen=True)
class SearchOptions:
    """A search's checked settings (stored as ``Sweep.search``)."""

    first_rung: int = DEFAULTS["first_rung"]
    eta: int = DEFAULTS["eta"]
    last_k: int = DEFAULTS["last_k"]
    target: str = DEFAULTS["target"]
    direction: str = "maximize"
    budget: int | None = None  # TPE: configurations to try
    ranges: dict[str, dict] = field(default_factory=dict)  # TPE: {field: checked range}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def stored(cls, data: dict) -> SearchOptions:
        """The options of a stored sweep (checked when it was created)."""
        return cls(**{k: v for k, v in data.items() if k in OPTION_KEYS})


def numeric_round_fields() -> list[str]:
    """The round fields a search may rank on: numbers, the round number left out."""
    return [f.name for f in round_fields.FIELDS if f.type in (int, float) and f.name != "round"]


def default_direction(target: str) -> str:
    return "maximize" if "accuracy" in target else "minimize"


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(errors: dict, name: str, value: Any, minimum: int, default: int | None) -> int | None:
    if value is None:
        return default
    if not _whole(value) or value < minimum:
        errors.setdefault(name, []).append(f"{name} must be a whole number >= {minimum}")
        return default
    return value


def check_target(errors: dict, target: Any) -> str:
    if target is None:
        return DEFAULTS["target"]
    if isinstance(target, str) and target.startswith(CUSTOM_PREFIX) and 0 < len(target[len(CUSTOM_PREFIX) :]) <= 100:
        return target
    if isinstance(target, str) and target in numeric_round_fields():
        return target
    errors.setdefault("target", []).append(
        f"target must be a numeric round field ({', '.join(numeric_round_fields()[:6])}, ...) "
        f"or {CUSTOM_PREFIX}<name> for a custom metric, not {target!r}"
    )
    return DEFAULTS["target"]


def check_range(name: str, spec: Any) -> tuple[dict | None, list[str]]:
    """One range, checked: (the range with its type filled in, []) or (None, [messages])."""
    where = f"ranges.{name}"
    if not isinstance(spec, dict):
        return None, [f'{where} must be an object such as {{"low": 0.001, "high": 0.1, "log": true}}']
    kind = spec.get("type", "choice" if "choices" in spec else "float")
    allowed = {"type", "choices"} if kind == "choice" else {"type", "low", "high", "log"}
    problems = [
        f"{where}.{k} is not a range setting (use {', '.join(sorted(allowed))})" for k in spec if k not in allowed
    ]
    if kind not in RANGE_TYPES:
        return None, [*problems, f"{where}.type must be one of {', '.join(RANGE_TYPES)}, not {kind!r}"]
    if kind == "choice":
        choices = spec.get("choices")
        ok = isinstance(choices, list) and choices and all(c is None or isinstance(c, str | bool) or _number(c)
                                                              for c in choices)  # fmt: skip
        if not ok:
            problems.append(f"{where}.choices must be a non-empty list of numbers, words, true/false or null")
        elif len({repr(c) for c in choices}) != len(choices):
            problems.append(f"{where}.choices lists a value twice")
        return (None if problems else {"type": "choice", "choices": choices}), problems
    low, high, log = spec.get("low"), spec.get("high"), spec.get("log", False)
    number = _whole if kind == "int" else _number
    what = "a whole number" if kind == "int" else "a finite number"
    for key, value in (("low", low), ("high", high)):
        if not number(value):
            problems.append(f"{where}.{key} must be {what}, not {value!r}")
    if not isinstance(log, bool):
        problems.append(f"{where}.log must be true or false")
    if not problems and low >= high:
        problems.append(f"{where}: low ({low}) must be below high ({high})")
    if not problems and log and low <= 0:
        problems.append(f"{where}: a log range needs low > 0, not {low}")
    return (None if problems else {"type": kind, "low": low, "high": high, "log": log}), problems


def check_ranges(errors: dict, ranges: Any, is_field) -> dict[str, dict]:
    """The ranges as {field: checked range}; each bad one reported under ``ranges.<field>``."""
    if not isinstance(ranges, dict) or not ranges:
        errors.setdefault("ranges", []).append("ranges must map at least one spec field to a range in tpe mode")
        return {}
    if len(ranges) > MAX_RANGES:
        errors.setdefault("ranges", []).append(f"at most {MAX_RANGES} ranges")
        return {}
    checked = {}
    for name, spec in ranges.items():
        if not is_field(name):
            errors.setdefault(f"ranges.{name}", []).append(f"ranges.{name}: {name} is not a spec field")
            continue
        one, problems = check_range(name, spec)
        if problems:
            errors.setdefault(f"ranges.{name}", []).extend(problems)
        else:
            checked[name] = one
    return checked


def check_options(*, mode: str, stopping: str, options: Any, rounds: int, is_field) -> SearchOptions:
    """The search settings as ``SearchOptions``; the errors of every bad field in ``errors`` at once.
    ``rounds``: the runs' length (a first rung at or past it never decides); ``is_field``: whether a
    dotted name is a spec field (``expand``'s rule, the same as for an axis)."""
    errors: dict[str, list[str]] = {}
    result = _options(errors, mode, stopping, options if isinstance(options, dict) else {}, rounds, is_field)
    if not isinstance(options, dict):
        errors.setdefault("search", []).append("search settings must be a JSON object")
    if errors:
        raise SweepError(errors)
    return result


def _options(errors: dict, mode: str, stopping: str, options: dict, rounds: int, is_field) -> SearchOptions:
    for key in options:
        if key not in OPTION_KEYS:
            errors.setdefault(key, []).append(f"{key} is not a search setting (use {', '.join(OPTION_KEYS)})")
    first = _count(errors, "first_rung", options.get("first_rung"), 1, DEFAULTS["first_rung"])
    eta = _count(errors, "eta", options.get("eta"), 2, DEFAULTS["eta"])
    last_k = _count(errors, "last_k", options.get("last_k"), 1, DEFAULTS["last_k"])
    target = check_target(errors, options.get("target"))
    direction = options.get("direction") or default_direction(target)
    if direction not in DIRECTIONS:
        errors.setdefault("direction", []).append(f"direction must be maximize or minimize, not {direction!r}")
    if stopping != "none" and first is not None and first >= rounds:
        errors.setdefault("first_rung", []).append(
            f"first_rung ({first}) must be below the runs' rounds ({rounds}): no decision would be made"
        )
    budget, ranges = None, {}
    if mode == "tpe":
        budget = _count(errors, "budget", options.get("budget"), 1, None)
        if budget is None and "budget" not in errors:
            errors["budget"] = ["budget (the configurations TPE tries) is required in tpe mode"]
        ranges = check_ranges(errors, options.get("ranges"), is_field)
    else:
        for key in ("budget", "ranges"):
            if options.get(key):
                errors.setdefault(key, []).append(f"{key} is for mode tpe only (this sweep's mode is {mode})")
    return SearchOptions(first, eta, last_k, target, direction, budget, ranges)
