"""Property: no hostile ingestion body gets a 5xx, and a refused one stores nothing (as for specs,
tests/api/test_hostile_property.py): random JSON trees, bad numbers written as JSON text, huge name
counts, deep nesting."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric

pytestmark = pytest.mark.django_db

HOSTILE = settings(
    derandomize=True, database=None, deadline=None, max_examples=120,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)  # fmt: skip
BAD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "9" * 25, '"1"', "true", "null", "[1]", '{"a":1}']
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


def _post(client, pk: int, text: str):
    return client.post(f"/api/external/runs/{pk}/rounds/", text, content_type="application/json")


def _nothing_stored(pk: int) -> bool:
    return not RoundMetric.objects.filter(experiment_id=pk).exists() and not CustomMetric.objects.exists()


@HOSTILE
@given(body=json_values)
def test_random_json_never_5xx(run, body):
    pk, client = run
    response = _post(client, pk, json.dumps(body))
    assert response.status_code < 500
    assert response.status_code == 400 and _nothing_stored(pk)


@HOSTILE
@given(token=st.sampled_from(BAD_NUMBERS), name=st.sampled_from(["loss", "participants", "my/metric", "x"]))
def test_bad_numbers_are_refused_naming_the_field(run, token, name):
    pk, client = run
    response = _post(client, pk, '{"rounds": [{"round": 1, "metrics": {"' + name + '": ' + token + "}}]}")
    assert name in response.content.decode() or "JSON" in response.content.decode()
    assert response.status_code == 400, response.content
    assert _nothing_stored(pk)


@pytest.mark.parametrize(
    "text, field",
    [
        (json.dumps({"rounds": [{"round": 1, "metrics": {f"m{i}": 1 for i in range(10**4)}}]}), "metrics"),
        (json.dumps({"rounds": [{"round": 1, "metrics": {"bad name!": 1}}]}), "bad name!"),
        (json.dumps({"rounds": [{"round": 0, "metrics": {}}]}), "round"),
        (json.dumps({"rounds": [{"round": "1", "metrics": {}}]}), "round"),
        (json.dumps({"rounds": [{"round": n, "metrics": {}} for n in range(1, 1100)]}), "rounds"),
        ('{"rounds": ' + "[" * 3000 + "]" * 3000 + "}", "detail"),
        ("x" * 100, "detail"),
    ],
)
def test_hostile_bodies_get_a_4xx_naming_the_field(run, text, field):
    pk, client = run
    response = _post(client, pk, text)
    assert 400 <= response.status_code < 500 and field in response.content.decode()
    assert _nothing_stored(pk)


def test_a_huge_body_is_refused(run, settings):
    pk, client = run
    response = _post(client, pk, json.dumps({"rounds": [{"round": 1, "metrics": {"a": 1}}], "pad": "x" * 30_000_000}))
    assert response.status_code == 413 and _nothing_stored(pk)
