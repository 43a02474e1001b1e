"""The filter language's parser (orchestrator/runs/query.py): what it reads, and the clear refusals
of what it cannot read, each saying what and where, whatever the input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.runs.query import (
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_TERMS,
    And,
    Not,
    QueryError,
    Term,
    Value,
    literal,
    parse,
)


def term(field, op, text, quoted=False):
    return (field, op, text, quoted)


def flat(node):
    """The tree with positions left out, as nested tuples."""
    if isinstance(node, Term):
        return term(node.field, node.op, node.value.text, node.value.quoted)
    if isinstance(node, Not):
        return ("not", flat(node.node))
    return ("and" if isinstance(node, And) else "or", *[flat(n) for n in node.nodes])


def test_it_reads_conditions_joined_by_and_or_not_and_parentheses():
    assert flat(parse("local.lr > 0.05 and algorithm.client.name = scaffold")) == (
        "and", term("local.lr", ">", "0.05"), term("algorithm.client.name", "=", "scaffold"),
    )  # fmt: skip
    # "and" binds tighter than "or"; side by side means "and"; "not" and parentheses nest.
    assert flat(parse("a = 1 or b = 2 c = 3")) == ("or", term("a", "=", "1"), ("and", term("b", "=", "2"), term("c", "=", "3")))  # fmt: skip
    assert flat(parse("not (a = 1 or tag:x)")) == ("not", ("or", term("a", "=", "1"), term("tag", "=", "x")))
    assert flat(parse("A=1 AND NOT b!=-2.5e-3")) == ("and", term("A", "=", "1"), ("not", term("b", "!=", "-2.5e-3")))
    assert parse("   ") is None and parse("") is None


def test_it_reads_quoted_values_free_text_and_unicode():
    assert flat(parse('name ~ "two words" fedprox')) == (
        "and", term("name", "~", "two words", True), term("", "~", "fedprox"),
    )  # fmt: skip
    assert flat(parse(r'tag:"a \"b\" c" owner = élodie')) == (
        "and", term("tag", "=", 'a "b" c', True), term("owner", "=", "élodie"),
    )  # fmt: skip
    assert flat(parse("created > 2026-01-31T12:00:00")) == term("created", ">", "2026-01-31T12:00:00")
    assert flat(parse('"données ✓" 数据')) == ("and", term("", "~", "données ✓", True), term("", "~", "数据"))


@pytest.mark.parametrize(
    "text, message, position",
    [
        ("x" * (MAX_LENGTH + 1), f"{MAX_LENGTH + 1} characters long; at most {MAX_LENGTH}", None),
        ("(" * (MAX_DEPTH + 1) + "a = 1" + ")" * (MAX_DEPTH + 1), "nests too deeply", MAX_DEPTH),
        ("not " * (MAX_DEPTH + 1) + "a = 1", "nests too deeply", 4 * MAX_DEPTH),
        (" and ".join(["a = 1"] * (MAX_TERMS + 1)), f"more than {MAX_TERMS} conditions", None),
        ("local.lr => 0.05", 'unknown operator "=>" after local.lr; did you mean ">="?', 9),
        ("local.lr >", 'local.lr > needs a value after ">"', 10),
        ("local.lr > )", 'local.lr > needs a value after ">"', 11),
        ('name = "open', "a quoted string is not closed", 7),
        ("(a = 1", 'a "(" is not closed', 0),
        ("a = 1)", '")" closes nothing', 5),
        ("= 1", '"=" needs a field name before it', 0),
        ("and a = 1", '"and" needs a condition before it', 0),
        ("a = 1 and", "the query ends where a condition should follow", 9),
        ("a\x00 = 1", "control character (U+0000)", 1),
        ("a = 1\x1b[2J", "control character (U+001B)", 5),
        ("1x > 2", '"1x" is not a field name', 0),
    ],
)
def test_it_refuses_what_it_cannot_read_saying_what_and_where(text, message, position):
    with pytest.raises(QueryError) as e:
        parse(text)
    assert message in str(e.value)
    if position is not None:
        assert e.value.position == position and f"(at character {position + 1})" in str(e.value)


def test_a_10_kb_query_and_deep_nesting_are_refused_before_any_recursion():
    for text in ("(" * 10_000, "a = 1 " * 2000, "not " * 2500):
        with pytest.raises(QueryError, match="characters long"):
            parse(text)
    deep = "(" * 900 + ")" * 900  # under the length limit, far over the depth one
    with pytest.raises(QueryError, match="nests too deeply"):
        parse(deep)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_or_is_refused_with_a_query_error(text):
    try:
        parse(text)
    except QueryError as e:
        assert str(e)  # never another exception (a RecursionError, an IndexError...)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False, allow_infinity=False),
                 st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=40)))  # fmt: skip
def test_a_literal_reads_back_as_its_value(value):
    parsed = parse(f"x = {literal(value)}")
    assert isinstance(parsed, Term) and parsed.field == "x"
    if isinstance(value, str):
        assert parsed.value == Value(value, quoted=True)
    elif value is None or isinstance(value, bool):
        assert parsed.value.text == literal(value) and not parsed.value.quoted
    else:
        assert float(parsed.value.text) == value and not parsed.value.quoted
