"""A run in a few numbers (orchestrator/experiments/summaries.py) and its spec as grouped tables (spec_table.py)."""

import pytest

from orchestrator.experiments.records import RoundMetric
from orchestrator.experiments.summaries import EMPTY, cells, summarize
from orchestrator.runs.run_summary import RunSummary
from orchestrator.web.spec_table import spec_groups
from tests.factories import round_result
from tests.web.conftest import make_experiment


def test_it_summarizes_final_and_best_accuracy_loss_rounds_time_and_bytes():
    rounds = [round_result(1, test_accuracy=0.5), round_result(2, test_accuracy=0.7, test_loss=0.9)]
    rounds.append(round_result(3, test_accuracy=None, test_loss=None))  # not evaluated: the final is round 2's
    summary = summarize(rounds)
    assert summary == {
        "final_accuracy": 0.7, "best_accuracy": 0.7, "final_loss": 0.9, "best_loss": 0.9, "rounds": 3, "seconds": 1.5,
        "bytes": 24_000, "epsilon": None,
    }  # fmt: skip
    assert [c["text"] for c in cells(summary)] == ["0.7000", "0.7000", "0.9000", "0.9000", "3", "1.5 s", "0.02", "–"]
    assert all(c["text"] == "–" for c in cells(summarize([])))


def maintained(pk: int) -> dict:
    """The summary the database keeps for a run (run_summary), as summarize's keys."""
    return {k: v for k, v in RunSummary.objects.get(pk=pk).state().items() if k in EMPTY}


@pytest.mark.django_db
def test_it_keeps_the_list_s_summaries_in_the_database_as_from_the_rounds(user):
    a, b, empty = make_experiment(user, rounds=5), make_experiment(user, rounds=3), make_experiment(user)
    RoundMetric.record(b, round_result(4, test_accuracy=None, test_loss=None))
    for experiment in (a, b):
        rounds = [r.to_result_dict() for r in experiment.rounds.order_by("round")]
        assert maintained(experiment.pk) == pytest.approx(summarize(rounds))
    assert not RunSummary.objects.filter(pk=empty.pk).exists()


@pytest.mark.django_db
def test_it_shows_the_final_epsilon_of_a_private_run_in_the_summary_the_list_and_the_compare_table(alice_client, user):
    private = make_experiment(user, name="dp")
    for n, eps in ((1, 0.8), (2, 1.25), (3, None)):  # ε grows; a round the accountant missed keeps the last
        RoundMetric.record(private, round_result(n, dp_epsilon=eps))
    plain = make_experiment(user, rounds=2, name="plain")
    assert maintained(private.pk)["epsilon"] == 1.25
    assert maintained(plain.pk)["epsilon"] is None
    epsilon = next(
        c for c in cells(summarize([r.to_result_dict() for r in private.rounds.all()])) if c["key"] == "epsilon"
    )
    assert epsilon["text"] == "1.250"
    pages = ("/", f"/experiments/{private.pk}/", f"/compare/?ids={private.pk},{plain.pk}")
    for url in pages:
        html = alice_client.get(url).content.decode()
        assert "Final ε" in html or "Privacy spent (final ε)" in html, url
        cell = ('data-col="epsilon" data-value="1.25">1.250<', 'data-col="epsilon"><span class="one-line">1.250<')
        assert any(c in html for c in cell) or "<b>1.250</b>" in html, url


def test_it_groups_the_spec_and_marks_the_fields_that_differ_from_the_defaults():
    groups = {
        g["name"]: {r["field"]: r for r in g["rows"]}
        for g in spec_groups({"rounds": 7, "seed": 0, "data": {"alpha": 0.1}})
    }
    assert list(groups) == ["run", "data"]
    assert groups["run"]["rounds"]["changed"] and not groups["run"]["seed"]["changed"]
    assert groups["data"]["alpha"]["value"] == "0.1" and groups["data"]["alpha"]["changed"]
    assert groups["data"]["alpha"]["default"] == "0.5" and groups["data"]["alpha"]["help"]


@pytest.mark.django_db
def test_it_shows_metric_columns_on_the_list_and_compare_pages_and_the_spec_table_on_the_dashboard(alice_client, user):
    a, b = make_experiment(user, rounds=3, name="a"), make_experiment(user, rounds=5, name="b")
    html = alice_client.get("/").content.decode()
    cell = '<td class="num" data-col="final_accuracy"><span class="one-line">{}</span>'
    assert cell.format("0.3000") in html and cell.format("0.5000") in html
    compare = alice_client.get(f"/compare/?ids={a.pk},{b.pk}").content.decode()
    assert '<table id="runs" class="sortable">' in compare and 'data-col="rounds" data-value="5"' in compare
    detail = alice_client.get(f"/experiments/{b.pk}/").content.decode()
    assert 'id="summary"' in detail and "0.5000" in detail and 'class="spec-table" data-group="data"' in detail
    assert '<details id="spec-raw">' in detail
