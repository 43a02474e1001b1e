"""The RoundResult field list is declared once, by the engine: the model, the API and the table follow it."""

import csv
import io

import pytest
import torch

from fedweb_engine import Spec
from fedweb_engine.results.round_result import ROUND_RESULT_FIELDS
from fedweb_engine.simulation.runner import Simulation
from orchestrator.api.serializers import RoundSerializer
from orchestrator.experiments.records import RoundMetric
from orchestrator.experiments.round_table import ROUND_FIELDS, TABLE_COLUMNS, rounds_of, table_rows, write_rounds_csv
from orchestrator.web.charts import dashboard_charts
from tests.web.conftest import make_experiment

TINY = {
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 10, "image_size": 8},
    "model": {"name": "mlp", "hidden": 16},
    "participation": {"clients_per_round": 4},
    "compute": {"device": "cpu"},
}


def test_it_stores_every_round_result_field_in_the_model():
    # The columns are derived from fedweb_engine/results/round_fields.py: this checks the derivation.
    bookkeeping = ("id", "experiment", "recorded", "claimed", "worker")  # the row's, not the engine's
    stored = [f.name for f in RoundMetric._meta.get_fields() if f.name not in bookkeeping]
    assert stored == list(ROUND_RESULT_FIELDS)


def test_it_serves_exactly_the_round_result_fields_in_the_api():
    assert list(RoundSerializer().fields) == list(ROUND_RESULT_FIELDS)


def test_it_shows_only_round_result_fields_and_the_worker_in_the_table():
    assert {c.field for c in TABLE_COLUMNS} <= set(ROUND_FIELDS) == {*ROUND_RESULT_FIELDS, "worker"}


@pytest.mark.django_db
def test_it_carries_the_update_norm_from_the_engine_to_the_table_the_csv_and_its_chart(user):
    # The field added as the proof that a new metric is one declaration, one engine line and a migration.
    sim = Simulation(Spec.from_dict(TINY))
    before = sim.global_flat.clone()
    result = sim.next_round().to_dict()
    assert result["update_norm"] == pytest.approx(float(torch.linalg.vector_norm(sim.global_flat - before)), rel=1e-5)
    assert result["update_norm"] > 0

    experiment = make_experiment(user, spec=TINY)
    RoundMetric.record(experiment, result)
    rounds = rounds_of(experiment)
    assert rounds[0]["update_norm"] == pytest.approx(result["update_norm"])
    column = [c.field for c in TABLE_COLUMNS].index("update_norm")
    assert table_rows(rounds)[0][column] == f"{result['update_norm']:.4f}"
    out = io.StringIO()
    write_rounds_csv(out, rounds)
    assert float(next(csv.DictReader(io.StringIO(out.getvalue())))["update_norm"]) == pytest.approx(
        result["update_norm"]
    )
    charts = dashboard_charts(rounds, experiment.spec)
    (trace,) = charts["figures"]["chart-update_norm"]["data"]
    assert trace["y"] == pytest.approx([result["update_norm"]]) and trace["meta"]["keys"] == ["update_norm"]
    panel = {"id": "chart-update_norm", "title": "Update norm", "memory": False, "note": "", "hidden": False}
    assert panel in charts["panels"]
    # A run recorded before the field (or an external one) has no such chart.
    assert "chart-update_norm" not in dashboard_charts([{**rounds[0], "update_norm": None}], None)["figures"]


@pytest.mark.django_db
def test_a_ditto_run_records_the_global_and_the_personal_worst_10_percent_side_by_side(user):
    spec = {
        **TINY,
        "seed": 1,
        "rounds": 1,
        "data": {**TINY["data"], "partition": "shards", "shards_per_client": 2, "client_test_fraction": 0.3},
        "algorithm": {"client": {"name": "ditto", "options": {"lam": 0.1}}},
        "participation": {"clients_per_round": 10},  # every client trains its personal model
        "evaluation": {"clients": "cohort", "cohort_size": 10},
    }
    sim = Simulation(Spec.from_dict(spec))
    results = [r.to_dict() for r in sim.run()]
    sim.close()
    last = results[-1]
    # Both models on the same clients' test splits: the global one, and each client's own.
    for key in (
        "client_accuracy_worst10",
        "client_accuracy_mean",
        "personal_accuracy_worst10",
        "personal_accuracy_mean",
    ):
        assert last[key] is not None and 0 <= last[key] <= 1, (key, last[key])
    assert last["personal_accuracy_worst10"] <= last["personal_accuracy_mean"]
    # Two models, not one copied: on 2-class shards the personal ones serve the worst clients far better.
    assert last["personal_accuracy_worst10"] > last["client_accuracy_worst10"] + 0.1, last

    experiment = make_experiment(user, spec=spec)
    for result in results:
        RoundMetric.record(experiment, result)
    rounds = rounds_of(experiment)
    traces = {t["name"]: t for t in dashboard_charts(rounds, experiment.spec)["figures"]["chart-clients"]["data"]}
    for name, key in (("worst 10% mean", "client_accuracy_worst10"), ("personal worst 10%", "personal_accuracy_worst10"),
                      ("mean", "client_accuracy_mean"), ("personal mean", "personal_accuracy_mean")):  # fmt: skip
        assert traces[name]["meta"]["keys"] == [key]
        assert traces[name]["y"] == pytest.approx([r[key] for r in results]), name
    # A run without personal models has the traces too (the chart is declared once), with no point.
    fedavg = dashboard_charts(
        [{**r, "personal_accuracy_worst10": None, "personal_accuracy_mean": None} for r in rounds]
    )
    personal = [t for t in fedavg["figures"]["chart-clients"]["data"] if t["name"].startswith("personal")]
    assert len(personal) == 2 and not any(t["visible"] or t["y"] for t in personal)


def test_the_ranks_columns_show_only_for_distributed_runs_with_one_value_per_rank():
    from orchestrator.experiments.round_table import shown_columns

    one = {"round": 1, "ranks": None, "rank_devices": None, "rank_train_seconds": None, "allreduce_seconds": None}
    two = {"round": 1, "ranks": 2, "rank_devices": ["w1 cpu", "w2 cpu"], "rank_train_seconds": [0.512, 0.498],
           "allreduce_seconds": 0.0043}  # fmt: skip
    labels = [c.label for c in shown_columns([one])]
    assert "Ranks" not in labels and "All-reduce s" not in labels
    assert "Ranks" in [c.label for c in shown_columns([], {"compute": {"ranks": 2}})]  # before its first round
    columns = shown_columns([two])
    cells = dict(zip([c.label for c in columns], table_rows([{**_blank_round(), **two}])[0], strict=True))
    assert cells["Ranks"] == "2" and cells["Rank devices"] == "w1 cpu, w2 cpu"
    assert cells["Rank train s"] == "0.51, 0.50" and cells["All-reduce s"] == "0.004"


def _blank_round() -> dict:
    return {name: None for name in ROUND_FIELDS}
