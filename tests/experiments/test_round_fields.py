"""The RoundResult field list is declared once, by the engine: the model, the API and the table follow it."""

from orchestrator.api.serializers import RoundSerializer
from orchestrator.experiments.records import RoundMetric
from orchestrator.experiments.rounds import ROUND_FIELDS, TABLE_COLUMNS
from workers.engine.result import ROUND_RESULT_FIELDS


def test_it_stores_every_round_result_field_in_the_model():
    # Django fields are static, so the model is the one place checked rather than derived.
    bookkeeping = ("id", "experiment", "recorded", "claimed", "worker")  # the row's, not the engine's
    stored = [f.name for f in RoundMetric._meta.get_fields() if f.name not in bookkeeping]
    assert stored == list(ROUND_RESULT_FIELDS)


def test_it_serves_exactly_the_round_result_fields_in_the_api():
    assert list(RoundSerializer().fields) == list(ROUND_RESULT_FIELDS)


def test_it_shows_only_round_result_fields_and_the_worker_in_the_table():
    assert {c.field for c in TABLE_COLUMNS} <= set(ROUND_FIELDS) == {*ROUND_RESULT_FIELDS, "worker"}
