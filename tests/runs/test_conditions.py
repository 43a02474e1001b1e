"""Queries as the database runs them (orchestrator/runs/conditions.py, table.py): on columns, summaries,
"to target" figures, spec fields and custom metrics, typed the same on SQLite and PostgreSQL
(test_conditions_postgres.py runs this module there), within what the user may read, with every
value a parameter of the SQL."""

from __future__ import annotations

import pytest
from django.db import connection

from orchestrator.models import Experiment
from orchestrator.runs.conditions import Context, to_q
from orchestrator.runs.query import QueryError, parse
from orchestrator.runs.table import TableSpec, groups, load, matching, page_ids, value, vocabulary_for

pytestmark = pytest.mark.django_db


def table(user, q: str = "", *, sort: str = "", target: float = 0.8, group=(), columns=()) -> TableSpec:
    ctx = Context(vocabulary_for(user), target=target)
    get = ctx.vocabulary.get
    by = get(sort.lstrip("-")) if sort else None
    return TableSpec(ctx, to_q(parse(q), ctx), q, [get(c) for c in columns], [get(g) for g in group], by,
                     sort.startswith("-"))  # fmt: skip


def names(user, q: str = "", **kw) -> list[str]:
    spec = table(user, q, **kw)
    return [e.name for e in load(user, page_ids(matching(user, spec), spec, 0, 100), spec)]


ALICE_SEES = ["ext script", "bob shared", "scaffold lr0.01", "scaffold lr0.1", "fedavg lr0.1"]  # newest first


# (query, the runs it keeps for alice, newest first): one world, every case (a world per case cost ~3 s on PostgreSQL).
CASES = [
    ("", ALICE_SEES),
    ("local.lr > 0.05 and algorithm.client.name = scaffold", ["bob shared", "scaffold lr0.1"]),
    # the external run's local.lr is the text "fast": no number comparison matches it, on either database
    ("local.lr > 0.05", ["bob shared", "scaffold lr0.1", "fedavg lr0.1"]),
    ("local.lr = fast", ["ext script"]),
    ('local.lr = "0.1"', []),
    ("not local.lr > 0.05", ["ext script", "scaffold lr0.01"]),  # a run without the value: "not" keeps it
    ("local.lr >= 0.1 and local.lr <= 0.1", ["scaffold lr0.1", "fedavg lr0.1"]),
    ("best_accuracy >= 0.9", ["bob shared", "fedavg lr0.1"]),
    ("tag:baseline", ["fedavg lr0.1"]),  # bob's and carol's baseline runs are not alice's to see
    ("not tag:baseline", ALICE_SEES[:-1]),
    ("tag ~ SCAF", ["scaffold lr0.1"]),
    ("owner = bob", ["bob shared"]),
    ("owner = carol or team = Audio", []),
    ("team = Vision", ["bob shared"]),
    ("team = null", ["ext script", "scaffold lr0.01", "scaffold lr0.1", "fedavg lr0.1"]),
    ("status = running", ["ext script", "scaffold lr0.01"]),
    ("status != running and kind = native", ["bob shared", "scaffold lr0.1", "fedavg lr0.1"]),
    ("rounds_to_target <= 2", ["bob shared", "scaffold lr0.1"]),  # target 0.8: rounds 1, 2 (and 3: fedavg)
    ("rounds_to_target = null", ["ext script", "scaffold lr0.01"]),
    ("mb_to_target < 0.02", ["bob shared", "scaffold lr0.1"]),  # 8000 bytes a round: 0.008, 0.016, 0.024 MB
    ("mb > 0.02", ["scaffold lr0.1", "fedavg lr0.1"]),  # 3 and 4 rounds of 0.008 MB
    ("custom.grad/norm.max > 2 and custom.grad/norm.last < 2", ["ext script"]),
    ("SCAFFOLD lr0", ["scaffold lr0.01", "scaffold lr0.1"]),  # free text: in the name, description or tags
    ("created > 1d and created < 2099-01-01", ALICE_SEES),
    ("created < 2000-01-01 or finished = null and round > 3", ["fedavg lr0.1"]),
    ('name = "x\'; DROP TABLE orchestrator_experiment; --"', []),
    (
        "(status = completed or status = running) and not (owner = bob or tag:baseline)",
        ["ext script", "scaffold lr0.01", "scaffold lr0.1"],
    ),  # noqa: E501
]


def test_it_keeps_the_runs_a_query_names_among_those_the_user_may_read(runs):
    for q, expected in CASES:
        assert names(runs.alice, q) == expected, q


def test_it_sorts_by_any_column_with_missing_values_last_either_way(runs):
    # Ties (bob's and alice's 0.9) go newest first.
    assert names(runs.alice, sort="-best_accuracy") == ["bob shared", "fedavg lr0.1", "scaffold lr0.1",
                                                        "scaffold lr0.01", "ext script"]  # fmt: skip
    assert names(runs.alice, sort="best_accuracy") == ["ext script", "scaffold lr0.01", "scaffold lr0.1",
                                                       "bob shared", "fedavg lr0.1"]  # fmt: skip
    assert names(runs.alice, sort="rounds_to_target") == ["bob shared", "scaffold lr0.1", "fedavg lr0.1",
                                                          "ext script", "scaffold lr0.01"]  # fmt: skip
    assert names(runs.alice, sort="-rounds_to_target")[:3] == ["fedavg lr0.1", "scaffold lr0.1", "bob shared"]
    # A spec field: its numbers in order, then its texts (the external run's "fast").
    assert names(runs.alice, sort="local.lr") == ["scaffold lr0.01", "scaffold lr0.1", "fedavg lr0.1", "bob shared",
                                                  "ext script"]  # fmt: skip
    assert (
        names(runs.alice, sort="-local.lr")[0] == "bob shared"
        and names(runs.alice, sort="-local.lr")[-1] == "ext script"
    )


def test_it_groups_by_a_spec_field_with_mean_and_std_over_completed_runs(runs):
    spec = table(runs.alice, group=["algorithm.client.name"], columns=["best_accuracy", "rounds_to_target"])
    found, total = groups(matching(runs.alice, spec), spec, 0, 50)
    by_key = {tuple(g["key"]): g for g in found}
    assert total == 3 and set(by_key) == {("fedavg",), ("scaffold",), (None,)}  # None: the external run
    scaffold = by_key[("scaffold",)]
    assert (scaffold["runs"], scaffold["completed"]) == (3, 2)  # the running one counts, but not in the means
    mean, std, n = scaffold["stats"]["best_accuracy"]
    assert n == 2 and mean == pytest.approx(0.86) and std == pytest.approx(0.0565685, rel=1e-5)
    assert scaffold["stats"]["rounds_to_target"][:2] == (pytest.approx(1.5), pytest.approx(0.7071068, rel=1e-5))
    assert by_key[("fedavg",)]["stats"]["best_accuracy"] == (pytest.approx(0.9), 0.0, 1)  # one run: std 0
    # Two columns, and the groups in the order of a column's mean.
    spec = table(
        runs.alice, group=["algorithm.client.name", "local.lr"], columns=["best_accuracy"], sort="-best_accuracy"
    )
    found, total = groups(matching(runs.alice, spec), spec, 0, 50)
    assert total == 5 and [g["key"] for g in found[:2]] == [["fedavg", 0.1], ["scaffold", 0.2]]


def test_a_bad_name_operator_or_value_is_refused_naming_it_and_the_nearest_name(runs):
    cases = {
        "local.lrr > 0.05": 'unknown field "local.lrr"; did you mean "local.lr"?',
        "best_acuracy >= 0.9": 'did you mean "best_accuracy"?',
        "status = runing": 'status is one of draft, queued, running, paused, cancelled, completed, failed, crashed, not "runing"; did you mean "running"?',  # noqa: E501
        "best_accuracy ~ 0.9": '"~" does not apply to the number field best_accuracy (use =, !=, >, >=, <, <=)',
        "best_accuracy > high": 'best_accuracy compares with a number, not "high"',
        "algorithm.client.name > scaffold": 'compares algorithm.client.name with a number, and "scaffold" is not one',
        "created > yesterday": "created compares with a date (2026-01-31), a time",
        "created > 9999-12-31": None,  # the last day there is: no overflow
        "best_accuracy > 1e999": 'best_accuracy compares with a number, not "1e999"',
        "custom.secret/metric.last > 0": 'unknown field "custom.secret/metric.last"',  # carol's metric: not alice's
        "secret_knob = 1": 'unknown field "secret_knob"',  # nor the keys of carol's script config
        "name >= x": '">=" does not apply to the text field name (use =, !=, ~, !~)',
    }
    for q, message in cases.items():
        if message is None:
            names(runs.alice, q)
            continue
        with pytest.raises(QueryError) as e:
            names(runs.alice, q)
        assert message in str(e.value), (q, str(e.value))
    assert names(runs.carol, "secret_knob = 1 and custom.secret/metric.last = 1") == ["carol script"]


def test_no_value_of_a_query_reaches_the_database_outside_a_parameter(runs):
    hostile = [
        "x'; DROP TABLE orchestrator_experiment; --",
        'a" OR 1=1 --',
        "%' OR '1'='1",
        "é\\'\"; SELECT pg_sleep(5)",
        '$.local"].lr',
        "{local,lr}",
    ]
    for text in hostile:
        literal = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        queries = [f"name = {literal}", f"local.lr = {literal}", f"tag:{literal}", literal, f"owner ~ {literal}"]
        for q in queries:
            sent = []  # (SQL, parameters) as the driver gets them

            def capture(execute, sql, params, many, context, sent=sent):
                sent.append((sql, params))
                return execute(sql, params, many, context)

            with connection.execute_wrapper(capture):
                assert names(runs.alice, q) == []
            assert all(text not in sql and "DROP" not in sql and "pg_sleep" not in sql for sql, _ in sent), sent
            bare = text.replace("\\", "")  # LIKE escapes backslashes, % and _ in a parameter's value
            assert any(bare in str(p).replace("\\", "") for _, params in sent for p in params or ()), q
    assert Experiment.objects.count() == 8


def test_the_values_of_a_page_s_cells(runs):
    spec = table(
        runs.alice,
        columns=["local.lr", "algorithm.client.name", "mb", "rounds_to_target", "custom.grad/norm.min", "sweep"],
    )  # noqa: E501
    rows = {e.name: e for e in load(runs.alice, [runs.r2.pk, runs.ext.pk], spec)}
    assert [value(rows["scaffold lr0.1"], c) for c in spec.columns] == [0.1, "scaffold", 24000, 2, None, None]
    assert [value(rows["ext script"], c) for c in spec.columns] == ["fast", None, None, None, 1.5, None]
