"""The "applies when" rules of the spec's field metadata: well-formed, and read the same way everywhere."""

from __future__ import annotations

import pytest

from fedweb_engine.spec.fields import applies
from fedweb_engine.spec.schema import Spec, spec_fields


def flat_choices(spec: Spec) -> dict:
    """Every non-option field of ``spec`` by dotted name (``communication.uplink.name``)."""
    out: dict = {}

    def walk(value: dict, prefix: str) -> None:
        for key, v in value.items():
            if isinstance(v, dict) and key != "options":
                walk(v, f"{prefix}{key}.")
            elif key != "options":
                out[f"{prefix}{key}"] = v

    walk(spec.to_dict(), "")
    return out


def applicable_fields(spec: Spec) -> dict[str, bool]:
    """Every field by dotted name: whether it has any effect under ``spec``'s choices, by its
    ``applies_when`` rule, read as the form's script reads it (validation ignores it)."""
    flat = flat_choices(spec)
    return {name: applies(meta["applies_when"], flat) for name, meta in spec_fields().items()}


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
        (
            {"model": {"name": "mlp"}},
            ["model.options.mlp.hidden"],
            ["model.options.vgg.blocks", "model.options.vgg.width"],
        ),
        (
            {"model": {"name": "vgg"}},
            ["model.options.vgg.blocks", "model.options.vgg.width"],
            ["model.options.mlp.hidden"],
        ),
        (
            {"algorithm": {"name": "fedadam"}},
            ["algorithm.options.fedadam.beta1", "algorithm.options.fedadam.beta2", "algorithm.options.fedadam.tau"],
            ["algorithm.options.fedyogi.beta1", "algorithm.options.fedavgm.momentum"],
        ),
        (
            {"algorithm": {"name": "fedadagrad"}},
            ["algorithm.options.fedadagrad.beta1", "algorithm.options.fedadagrad.tau"],
            ["algorithm.options.fedadam.beta2"],
        ),
        (
            {"algorithm": {"name": "fedavgm"}},
            ["algorithm.options.fedavgm.momentum"],
            ["algorithm.options.fedadam.beta1", "algorithm.options.fedadam.tau"],
        ),
        (
            {"algorithm": {"name": "fedavg"}},
            ["algorithm.client.name"],
            ["algorithm.options.fedavgm.momentum", "algorithm.client.options.fedprox.mu"],
        ),
        (
            {"algorithm": {"name": "fedadam", "client": {"name": "fedprox"}}},  # FedProx's μ is its client's option
            ["algorithm.client.options.fedprox.mu", "algorithm.options.fedadam.beta2"],
            ["algorithm.client.options.feddyn.alpha", "algorithm.client.options.ditto.lam"],
        ),
        (
            {"communication": {"uplink": "topk"}},  # a flat spec: the bare codec name
            ["communication.uplink.options.topk.ratio", "communication.error_feedback"],
            ["communication.downlink.options.topk.ratio"],
        ),
        (
            {"communication": {"downlink": {"name": "topk"}}},
            ["communication.downlink.options.topk.ratio"],
            ["communication.error_feedback", "communication.uplink.options.topk.ratio"],
        ),
        (
            {},
            [],
            [
                "communication.uplink.options.topk.ratio",
                "communication.downlink.options.topk.ratio",
                "communication.error_feedback",
            ],
        ),
        (
            {"data": {"dataset": "synthetic", "partition": "natural"}, "model": {"name": "logistic"}},
            ["data.options.synthetic.alpha", "data.options.synthetic.beta"],
            [
                "data.options.tokens.seq_len",
                "data.options.digits.image_size",
                "data.options.synthetic_images.num_classes",
                "data.options.cifar10.path",
                "data.options.synthetic_images.mean_samples",
            ],
        ),
        (
            {"data": {"name": "tokens", "partition": "natural"}, "model": {"name": "lm14m"}},
            ["data.options.tokens.seq_len", "data.options.tokens.mean_samples"],
            ["data.options.synthetic.alpha", "data.options.digits.image_size", "data.options.cifar10.path"],
        ),
        (
            {"data": {"dataset": "cifar10", "path": "c"}},
            ["data.options.cifar10.path"],
            ["data.options.digits.image_size", "data.options.tokens.seq_len"],
        ),
        ({"compute": {"training": "sequential"}}, [], ["compute.compile"]),
    ],
)
def test_it_says_which_fields_apply_to_a_spec(spec, shown, hidden):
    applicable = applicable_fields(Spec.from_dict(spec))
    assert [f for f in shown if not applicable[f]] == [] and [f for f in hidden if applicable[f]] == []
    assert applicable["seed"] and applicable["data.name"] and applicable["rounds"]


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
