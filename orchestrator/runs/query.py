"""The runs table's filter language, parsed into a small tree (no Django here).

    local.lr > 0.05 and algorithm.client.name = scaffold
    best_accuracy >= 0.9 tag:baseline            (terms side by side are joined by "and")
    (status = completed or status = running) and not owner = bob
    created > 7d                                 (newer than seven days; or a date, 2026-01-31)
    fedprox                                      (a bare word: text in the name, description or tags)

A term is ``field op value`` with op one of ``= != > >= < <= ~ !~`` (``~``: contains), or
``field:value`` (the same as ``=``, e.g. ``tag:baseline``). Values are numbers, bare words, quoted
strings ("two words", with backslash escapes), ``true``/``false`` or ``null``. Which fields exist and
what a value means for each is the vocabulary's business (``vocabulary.py``); this module only
reads the shape, and refuses, with a ``QueryError`` saying where, anything it cannot read: text too
long, nested too deeply, too many terms, control characters, an unknown operator, a dangling one.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from dataclasses import dataclass

MAX_LENGTH = 2000  # characters
MAX_DEPTH = 8  # parentheses and "not" inside one another
MAX_TERMS = 40
OPERATORS = ("=", "!=", ">", ">=", "<", "<=", "~", "!~")
KEYWORDS = ("and", "or", "not")

_TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<open>\()|(?P<close>\))
    |(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    |(?P<op>[=<>!~]+)
    |(?P<word>[^\s()"'=<>!~]+)""",
    re.VERBOSE | re.DOTALL,
)
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_./\-]*")


class QueryError(ValueError):
    """A query that cannot be read or run; ``position`` is the 0-based character it points at."""

    def __init__(self, message: str, position: int | None = None):
        where = f" (at character {position + 1})" if position is not None else ""
        super().__init__(message + where)
        self.position = position


@dataclass(frozen=True)
class Value:
    text: str
    quoted: bool = False  # a quoted string is always text, never a number or a keyword


@dataclass(frozen=True)
class Term:
    field: str  # "" for free text
    op: str
    value: Value
    position: int


@dataclass(frozen=True)
class Not:
    node: Node


@dataclass(frozen=True)
class And:
    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    nodes: tuple[Node, ...]


Node = Term | Not | And | Or


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    position: int


def suggest(name: str, known, what: str = "") -> str:
    """`` did you mean "x"?`` for the closest of ``known`` to ``name``, or ""."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f'; did you mean "{close[0]}"?' if close else ""


def _suggest_operator(op: str) -> str:
    """The operator meant: the same characters in another order (=> for >=), SQL's <> for !=, or the closest."""
    anagram = [o for o in OPERATORS if sorted(o) == sorted(op)]
    if anagram or op == "<>":
        return f'; did you mean "{anagram[0] if anagram else "!="}"?'
    return suggest(op, OPERATORS)


def _check_characters(text: str) -> None:
    for i, c in enumerate(text):
        if unicodedata.category(c) in ("Cc", "Cs") and c not in "\t\n\r":
            raise QueryError(f"the query contains a control character (U+{ord(c):04X})", i)


def _unquote(raw: str) -> str:
    return re.sub(r"\\(.)", r"\1", raw[1:-1], flags=re.DOTALL)


def tokenize(text: str) -> list[_Token]:
    tokens, i = [], 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:  # only an unmatched quote is left over
            raise QueryError("a quoted string is not closed", i)
        if m.lastgroup != "space":
            tokens.append(_Token(m.lastgroup, m.group(), i))
        i = m.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[_Token]):
        self.tokens, self.i, self.terms = tokens, 0, 0

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def keyword(self, word: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.lower() == word:
            self.i += 1
            return True
        return False

    def expr(self, depth: int) -> Node:
        nodes = [self.conjunction(depth)]
        while self.keyword("or"):
            nodes.append(self.conjunction(depth))
        return nodes[0] if len(nodes) == 1 else Or(tuple(nodes))

    def conjunction(self, depth: int) -> Node:
        nodes = [self.unary(depth)]
        while (token := self.peek()) is not None and token.kind != "close" and token.text.lower() != "or":
            self.keyword("and")
            nodes.append(self.unary(depth))
        return nodes[0] if len(nodes) == 1 else And(tuple(nodes))

    def unary(self, depth: int) -> Node:
        token = self.peek()
        if token is None:
            raise QueryError("the query ends where a condition should follow", self._end())
        if token.kind in ("open", "word") and (token.kind == "open" or token.text.lower() == "not"):
            if depth >= MAX_DEPTH:
                raise QueryError(f"the query nests too deeply: at most {MAX_DEPTH} levels of parentheses and not", token.position)  # fmt: skip
            self.take()
            if token.kind == "word":
                return Not(self.unary(depth + 1))
            node = self.expr(depth + 1)
            close = self.peek()
            if close is None or close.kind != "close":
                raise QueryError('a "(" is not closed', token.position)
            self.take()
            return node
        return self.term()

    def term(self) -> Term:
        token = self.take()
        self.terms += 1
        if self.terms > MAX_TERMS:
            raise QueryError(f"the query has more than {MAX_TERMS} conditions", token.position)
        if token.kind == "close":
            raise QueryError('a ")" closes nothing', token.position)
        if token.kind == "op":
            raise QueryError(f'"{token.text}" needs a field name before it', token.position)
        if token.kind == "string":
            return Term("", "~", Value(_unquote(token.text), quoted=True), token.position)
        if token.text.lower() in KEYWORDS:
            raise QueryError(f'"{token.text}" needs a condition before it', token.position)
        field, colon, rest = token.text.partition(":")
        if colon and _FIELD.fullmatch(field):  # field:value, e.g. tag:baseline
            return Term(field, "=", self._value(field, "=", token, rest), token.position)
        nxt = self.peek()
        if nxt is None or nxt.kind != "op":
            return Term("", "~", Value(token.text), token.position)  # free text
        self.take()
        if nxt.text == "==":
            op = "="
        elif nxt.text not in OPERATORS:
            raise QueryError(f'unknown operator "{nxt.text}" after {token.text}{_suggest_operator(nxt.text)}', nxt.position)  # fmt: skip
        else:
            op = nxt.text
        if not _FIELD.fullmatch(token.text):
            raise QueryError(f'"{token.text}" is not a field name (letters, digits, _ . / -)', token.position)
        return Term(token.text, op, self._value(token.text, op, nxt, None), token.position)

    def _value(self, field: str, op: str, after: _Token, inline: str | None) -> Value:
        if inline:  # field:value in one word
            return Value(inline)
        token = self.peek()
        if token is None or token.kind not in ("word", "string"):
            position = token.position if token else self._end()
            raise QueryError(f'{field} {op} needs a value after "{after.text}"', position)
        self.take()
        return Value(_unquote(token.text), quoted=True) if token.kind == "string" else Value(token.text)

    def _end(self) -> int:
        last = self.tokens[-1] if self.tokens else None
        return last.position + len(last.text) if last else 0


def parse(text: str) -> Node | None:
    """The tree of ``text``; None for an empty query (every run); ``QueryError`` when unreadable."""
    if len(text) > MAX_LENGTH:
        raise QueryError(f"the query is {len(text)} characters long; at most {MAX_LENGTH}")
    _check_characters(text)
    tokens = tokenize(text)
    if not tokens:
        return None
    parser = _Parser(tokens)
    node = parser.expr(0)
    if (extra := parser.peek()) is not None:
        raise QueryError(f'"{extra.text}" closes nothing' if extra.kind == "close" else f'unexpected "{extra.text}"', extra.position)  # fmt: skip
    return node


def literal(value) -> str:
    """``value`` written so that ``parse`` reads it back as the same value (the drill-down links of
    grouped rows): numbers and booleans as they are, null, anything else as a quoted string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'
