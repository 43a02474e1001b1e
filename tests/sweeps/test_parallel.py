"""The sweep's parallel coordinates (orchestrator/web/sweep_charts.py): nothing until a run has a value,
integer ticks for whole-number fields, formatted numbers."""

from orchestrator.web.sweep_charts import NO_TARGET_TEXT, parallel_figure


def _rows(targets, **values):
    return [{"values": {k: v[i] for k, v in values.items()}, "target": t} for i, t in enumerate(targets)]


def test_it_draws_nothing_until_a_run_has_a_final_accuracy():
    assert parallel_figure(["local.epochs"], _rows([None, None], **{"local.epochs": [1, 3]})) is None
    assert "final accuracy" in NO_TARGET_TEXT


def test_it_draws_only_the_runs_with_a_value_on_a_colour_scale_of_their_values():
    rows = _rows([0.34169, None, 0.260649], **{"local.epochs": [1, 2, 3]})
    parcoords = parallel_figure(["local.epochs"], rows)["data"][0]
    epochs, accuracy = parcoords["dimensions"]
    assert epochs["ticktext"] == ["1", "3"]  # the unfinished run is not drawn at accuracy 0
    assert accuracy["values"] == [0.34169, 0.260649] and accuracy["tickformat"] == ".3f"
    assert (parcoords["line"]["cmin"], parcoords["line"]["cmax"]) == (0.260649, 0.34169)
    assert parcoords["line"]["colorbar"]["tickformat"] == ".3f"


def test_it_ticks_whole_number_fields_at_whole_numbers_and_formats_the_others():
    rows = _rows([0.5, 0.6, 0.7, 0.8], **{"local.epochs": [1, 2, 3, 3], "algorithm.mu": [0.001, 0.01, 0.1, 0.1]})
    epochs, mu, _ = parallel_figure(["local.epochs", "algorithm.mu"], rows)["data"][0]["dimensions"]
    assert epochs["ticktext"] == ["1", "2", "3"] and epochs["values"] == [0, 1, 2, 2]  # one place per value
    assert mu["ticktext"] == ["0.001", "0.01", "0.1"] and mu["tickvals"] == [0, 1, 2]  # evenly spaced, in order
    many = _rows([0.5] * 20, **{"data.num_clients": list(range(10, 210, 10))})
    (clients, _) = parallel_figure(["data.num_clients"], many)["data"][0]["dimensions"]
    assert clients["tickformat"] == ",d"
