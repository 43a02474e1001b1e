"""Parsing untrusted input: JSON documents and integer parameters.

Everything a client sends is parsed here, so that a hostile document gets a clear "bad request"
instead of crashing the code that reads it. Python's ``json`` raises ``RecursionError`` on deep
nesting, ``ValueError`` on integers of more than 4,300 digits and happily returns ``inf``, NaN,
lone surrogates and NUL characters, which then break the spec validator, ``json.dumps`` or the
database further down. ``loads`` refuses all of them up front with a message that says what.
"""

from __future__ import annotations

import json
import math
from typing import Any

# Deeper than any real spec (3 levels) by far, shallow enough for every recursive reader after us.
MAX_JSON_DEPTH = 64
# Integers must fit the database's 64-bit columns (and float() for spec fields).
MAX_INT = 2**63 - 1


class JSONInputError(ValueError):
    """A client's JSON that we refuse; its message is safe to show to the client."""


def loads(data: str | bytes, encoding: str = "utf-8") -> Any:
    """Parse a client's JSON document, refusing what would crash or corrupt the code after us.

    Refused with ``JSONInputError``: invalid text in ``encoding``, syntax errors, nesting deeper than
    ``MAX_JSON_DEPTH``, NaN/Infinity and numbers that overflow a float, integers outside ±``MAX_INT``,
    and strings (or keys) holding NUL characters or unpaired surrogates.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode(encoding)
        except UnicodeDecodeError:
            raise JSONInputError(f"The body is not valid {encoding} text") from None
    try:
        value = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int)
    except RecursionError:  # the C scanner's own guard, far below the interpreter's stack limit
        raise JSONInputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except JSONInputError:
        raise
    except ValueError as e:  # JSONDecodeError, or int()'s digit limit
        raise JSONInputError(f"Invalid JSON: {_short(str(e))}") from None
    check_tree(value)
    return value


def check_tree(value: Any) -> None:
    """Refuse a parsed document nested deeper than ``MAX_JSON_DEPTH`` or holding unstorable text.

    Iterative, so that checking a deep document cannot itself overflow the stack.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            _check_depth(depth)
            for key, item in node.items():
                _check_text(key)
                stack.append((item, depth + 1))
        elif isinstance(node, list):
            _check_depth(depth)
            stack.extend((item, depth + 1) for item in node)
        elif isinstance(node, str):
            _check_text(node)


def parse_int(raw: str | None, *, minimum: int = -MAX_INT) -> int | None:
    """An integer parameter in ASCII digits (optionally signed) within [minimum, MAX_INT], else None.

    ``str.isdigit()`` is not enough: it is true for "²" (which ``int()`` refuses) and for 5,000
    digits (which the database refuses).
    """
    text = (raw or "").strip()
    digits = text[1:] if text[:1] in "+-" else text
    if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(MAX_INT)):
        return None
    value = int(text)
    return value if minimum <= value <= MAX_INT else None


def int_value(raw: Any) -> int | None:
    """A whole number from a form field or a JSON value: an int (not a bool) or text ``parse_int``
    accepts; None for anything else (a float, a list, "²")."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = str(raw)
    return parse_int(raw) if isinstance(raw, str) else None


def _check_depth(depth: int) -> None:
    if depth > MAX_JSON_DEPTH:
        raise JSONInputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


def _check_text(text: str) -> None:
    if "\x00" in text:
        raise JSONInputError("JSON text may not contain NUL characters (\\u0000)")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JSONInputError("JSON text may not contain unpaired surrogates (\\ud800-\\udfff)") from None


def _refuse_constant(name: str) -> float:
    raise JSONInputError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONInputError(f"{_short(text)} is too large for a number")
    return value


def _bounded_int(text: str) -> int:
    digits = text.lstrip("-")
    if len(digits) > len(str(MAX_INT)) or abs(int(text)) > MAX_INT:
        raise JSONInputError(f"{_short(text)} is outside the integer range ±{MAX_INT}")
    return int(text)


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…"
