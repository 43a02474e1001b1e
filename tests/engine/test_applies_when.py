"""The "applies when" rules of the spec's field metadata: well-formed, and read the same way everywhere."""

from __future__ import annotations

import pytest

from workers.engine.fields import applies
from workers.engine.spec import Spec, applicable_fields, spec_fields


def test_it_names_only_choice_fields_and_their_choices_in_every_rule():
    fields = spec_fields()
    for name, meta in fields.items():
        for alternative in meta["applies_when"] or []:
            for control, values in alternative.items():
                assert fields[control]["choices"], (name, control)  # a select the page can watch
                assert values and set(values) <= set(fields[control]["choices"]), (name, control, values)
                assert fields[control]["applies_when"] is None, (name, control)  # no chains to follow


@pytest.mark.parametrize(
    "spec, shown, hidden",
    [
        ({"data": {"partition": "dirichlet"}}, ["data.alpha"], ["data.shards_per_client"]),
        ({"data": {"partition": "shards"}}, ["data.shards_per_client"], ["data.alpha"]),
        ({"data": {"partition": "iid"}}, [], ["data.alpha", "data.shards_per_client"]),
        ({"model": {"name": "mlp"}}, ["model.hidden"], ["model.blocks", "model.width"]),
        ({"model": {"name": "vgg"}}, ["model.blocks", "model.width"], ["model.hidden"]),
        ({"algorithm": {"name": "fedadam"}}, ["algorithm.beta1", "algorithm.beta2", "algorithm.tau"], []),
        ({"algorithm": {"name": "fedadagrad"}}, ["algorithm.beta1", "algorithm.tau"], ["algorithm.beta2"]),
        ({"algorithm": {"name": "fedavgm"}}, ["algorithm.server_momentum"], ["algorithm.beta1", "algorithm.tau"]),
        ({"algorithm": {"name": "fedavg"}}, ["algorithm.mu"], ["algorithm.server_momentum", "algorithm.beta2"]),
        ({"communication": {"uplink": "topk"}}, ["communication.topk_ratio", "communication.error_feedback"], []),
        ({"communication": {"downlink": "topk"}}, ["communication.topk_ratio"], ["communication.error_feedback"]),
        ({}, [], ["communication.topk_ratio", "communication.error_feedback"]),
        (
            {"data": {"dataset": "synthetic", "partition": "natural"}, "model": {"name": "logistic"}},
            ["data.synthetic_alpha", "data.synthetic_beta"],
            ["data.seq_len", "data.image_size", "data.num_classes", "data.path", "data.mean_samples"],
        ),
        (
            {"data": {"dataset": "tokens", "partition": "natural"}, "model": {"name": "lm14m"}},
            ["data.seq_len", "data.mean_samples"],
            ["data.synthetic_alpha", "data.image_size", "data.num_classes", "data.path"],
        ),
        ({"data": {"dataset": "cifar10", "path": "c"}}, ["data.path"], ["data.image_size", "data.seq_len"]),
        ({"compute": {"training": "sequential"}}, [], ["compute.compile"]),
    ],
)
def test_it_says_which_fields_apply_to_a_spec(spec, shown, hidden):
    applicable = applicable_fields(Spec.from_dict(spec))
    assert [f for f in shown if not applicable[f]] == [] and [f for f in hidden if applicable[f]] == []
    assert applicable["seed"] and applicable["data.dataset"] and applicable["rounds"]


def test_it_reads_a_rule_as_any_alternative_with_every_field_matching():
    rule = [{"a": ["x"], "b": ["y", "z"]}, {"c": ["w"]}]
    assert applies(rule, {"a": "x", "b": "z"}) and applies(rule, {"c": "w"})
    assert not applies(rule, {"a": "x", "b": "q"}) and not applies(rule, {}) and applies(None, {})


def test_it_validates_a_field_that_does_not_apply_like_any_other():
    # Hidden from view is not exempt: the API and the form accept the same specs.
    spec = Spec.from_dict({"data": {"partition": "iid", "alpha": 0.25}})
    assert not applicable_fields(spec)["data.alpha"] and spec.data.alpha == 0.25
    with pytest.raises(ValueError, match="data.alpha must be > 0"):
        Spec.from_dict({"data": {"partition": "iid", "alpha": 0}})
