"""How a spec field is declared: its metadata, and the one reader of its "applies when" rule.

Each spec field carries (in ``dataclasses.field(metadata=...)``) what
:mod:`fedweb_engine.spec.validation` checks — ``choices``, ``min``/``max``, ``min_open``,
``nullable``, ``max_length`` — and what people need to fill it in: ``help``, ``advanced`` (folded
away in the form) and ``applies_when``: the choices under which the field has any effect.

``applies_when`` is a list of alternatives, each ``{dotted choice field: [values]}``; the field
applies when, for some alternative, every named field holds one of its values. ``None`` means
always. It is data, so the form (server side) and the page script read the same rule. A field
that does not apply is still validated: the API and the form accept exactly the same specs.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

Rule = list[dict[str, list]]


def meta(
    help: str,
    *,
    choices=None,
    min=None,
    max=None,
    min_open=False,
    nullable=False,
    max_length=None,
    applies_when: dict | list[dict] | None = None,
    advanced: bool = False,
    path: bool = False,
    size: bool = False,
    kind: str | None = None,
    applied_default: Any = None,
) -> dict[str, Any]:
    """The metadata of one spec field; ``applies_when`` may be one alternative (a dict) or a list."""
    return {
        "help": help,
        "choices": choices,
        "min": min,
        "max": max,
        "min_open": min_open,
        "nullable": nullable,
        "max_length": max_length,  # of a string or a list
        "applies_when": _rule(applies_when),
        "advanced": advanced,
        "path": path,  # a file or folder under the server's datasets folder (checked, confined)
        "size": size,  # the option that makes a model or dataset big: the capacity check names it
        "kind": kind,  # the value names a component of this registry kind (choices read from the registry)
        # The value it takes when its applies_when rule starts to hold and it was left out (or, in the
        # form, still holds its default): a default that is right only while the field does not apply.
        "applied_default": applied_default,
    }


def spec_field(default, help: str, **kw):
    """A dataclass field with ``default`` (a list default is copied per instance) and :func:`meta`."""
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=meta(help, **kw))
    return field(default=default, metadata=meta(help, **kw))


def _rule(applies_when: dict | list[dict] | None) -> Rule | None:
    # One shape for every reader (Python, the template's data attribute, the page script).
    if applies_when is None:
        return None
    alternatives = [applies_when] if isinstance(applies_when, dict) else applies_when
    return [{name: list(values) for name, values in alt.items()} for alt in alternatives]


def applies(rule: Rule | None, values: dict[str, Any]) -> bool:
    """Whether a field with ``rule`` has any effect when the choice fields hold ``values``
    (dotted name -> value, e.g. ``{"data.partition": "iid"}``)."""
    if rule is None:
        return True
    return any(all(values.get(name) in allowed for name, allowed in alt.items()) for alt in rule)
