"""Checks of a component's option metadata, run when the component is registered.

Metadata that makes no sense (``min_open`` without ``min``, ``min`` above ``max``, a bound that is
not a number, a default its own constraints refuse) would otherwise give a field with no bound at
all, or one whose default no spec could carry, and the mistake would surface only in a user's
form. :func:`check_options` turns it into an error at import, naming the component and the field.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from fedweb_engine.spec.validation import SpecError, coerce, kind_of


class OptionMetadataError(ValueError):
    """An option whose metadata makes no sense; ``field`` names it."""

    def __init__(self, where: str, field: str, message: str):
        super().__init__(f"{where}: option {field!r} {message}")
        self.field = field


def check_options(where: str, options: type) -> None:
    """Raise :class:`OptionMetadataError` for the first option of ``options`` (a dataclass)
    whose metadata makes no sense; ``where`` names the component (``"model 'wide_cnn'"``)."""
    defaults = dataclasses.asdict(options())
    for f in dataclasses.fields(options):
        _check_field(where, f, defaults[f.name])


def _check_field(where: str, f: dataclasses.Field, default: Any) -> None:
    def fail(message: str) -> None:
        raise OptionMetadataError(where, f.name, message)

    try:
        kind = kind_of(f)
    except TypeError:
        fail(f"has type {f.type!r}; options are bool, int, float, str, list[int] or one of them | None")
    meta = f.metadata
    lo, hi, min_open = meta.get("min"), meta.get("max"), meta.get("min_open", False)
    if not isinstance(min_open, bool):
        fail(f"has min_open={min_open!r}: it is True or False and makes min exclusive (min_open=True, min=0.0)")
    if min_open and lo is None:
        fail("has min_open=True without min: give the exclusive lower bound as min")
    for bound, value in (("min", lo), ("max", hi)):
        if value is None:
            continue
        if kind not in (int, float):
            fail(f"has {bound} on a {kind.__name__} option: bounds are for numbers")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            fail(f"has {bound}={value!r}: it must be a finite number")
    if lo is not None and hi is not None and (lo > hi or (min_open and lo == hi)):
        fail(f"has min={lo!r} above max={hi!r}: no value is allowed")
    choices = meta.get("choices")
    if choices is not None and (isinstance(choices, (str, bytes)) or not choices):
        fail(f"has choices={choices!r}: give a non-empty list of values")
    length = meta.get("max_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
        fail(f"has max_length={length!r}: it must be a positive integer")
    try:
        coerce(f, default, "default")
    except SpecError as e:
        fail(f"has a default {default!r} its own constraints refuse ({e.message})")
