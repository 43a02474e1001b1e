import json

import pytest

from fedweb_engine.spec.presets import PRESETS, preset_spec
from fedweb_engine.spec.schema import Spec, SpecError, spec_fields


def test_it_fills_every_default():
    spec = Spec.from_dict({})

    assert spec == Spec()
    assert spec.data.dataset == "digits"
    assert spec.compute.client_group_size == 64


def test_it_round_trips_through_json():
    spec = Spec.from_dict({"rounds": 7, "data": {"alpha": 0.1}, "participation": {"schedule": [1, 2, 3, 4, 5, 6, 7]}})

    again = Spec.from_json(spec.to_json())

    assert again == spec
    assert json.loads(again.to_json()) == spec.to_dict()


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"rounds": -1}, "rounds"),
        ({"rounds": "ten"}, "rounds"),
        ({"data": {"alpha": 0}}, "data.alpha"),
        ({"data": {"alpha": -0.5}}, "data.alpha"),
        ({"model": {"name": "resnet"}}, "model.name"),
        ({"local": {"lr": "fast"}}, "local.lr"),
        ({"bogus": 1}, "bogus"),
        ({"data": {"bogus": 1}}, "data.bogus"),
        ({"rounds": 5, "participation": {"schedule": [3, 3]}}, "participation.schedule"),
        ({"rounds": 2, "participation": {"schedule": [3, 1000]}}, "participation.schedule"),
        ({"participation": {"clients_per_round": 101}}, "participation.clients_per_round"),
        ({"algorithm": {"name": "fedadam", "server_optimizer": "sgd"}}, "algorithm.server_optimizer"),
        ({"data": {"dataset": "cifar10"}}, "data.options.path"),
        ({"compute": {"device": "gpu"}}, "compute.device"),
        ({"heterogeneity": {"dropout": 1.5}}, "heterogeneity.dropout"),
        ({"communication": {"error_feedback": "yes"}}, "communication.error_feedback"),
        ({"data": []}, "data"),
    ],
)
def test_it_names_the_field_of_a_bad_value(raw, field):
    with pytest.raises(SpecError) as err:
        Spec.from_dict(raw)

    assert err.value.field == field
    assert str(err.value).startswith(field + " ")


def test_it_says_alpha_must_be_positive():
    with pytest.raises(SpecError, match=r"^data\.alpha must be > 0$"):
        Spec.from_dict({"data": {"alpha": 0}})


def test_it_derives_the_server_optimizer_from_the_algorithm():
    assert Spec.from_dict({"algorithm": {"name": "fedyogi"}}).algorithm.server_optimizer == "yogi"
    assert Spec.from_dict({"algorithm": {"name": "fedavgm"}}).algorithm.server_optimizer == "sgd"


def test_it_uses_the_schedule_for_cohort_sizes():
    spec = Spec.from_dict({"rounds": 3, "participation": {"schedule": [5, 7, 9]}})

    assert [spec.cohort_size(r) for r in (1, 2, 3)] == [5, 7, 9]


def test_it_documents_every_field():
    help = spec_fields()

    assert help["data.alpha"]["default"] == 0.5
    assert help["local.batch_size"]["type"] == "int"
    assert all(meta["help"] for meta in help.values())


def test_it_builds_every_preset():
    for name in PRESETS:
        assert preset_spec(name).rounds >= 1


NUMERIC_FIELDS = [
    name for name, meta in spec_fields().items() if meta["type"] in ("int", "float") and not meta["choices"]
]


def _nested(dotted: str, value) -> dict:
    section, _, name = dotted.partition(".")
    return {section: {name: value}} if name else {section: value}


def test_it_bounds_every_numeric_field_on_both_sides():
    help = spec_fields()
    assert NUMERIC_FIELDS and all(help[f]["min"] is not None and help[f]["max"] is not None for f in NUMERIC_FIELDS)


@pytest.mark.parametrize("field", NUMERIC_FIELDS)
@pytest.mark.parametrize("value", [1e308, 10**18, -1, "NaN", float("inf"), "1e3", [1], {"x": 1}, True])
def test_it_refuses_hostile_numbers_naming_the_field(field, value):
    with pytest.raises(SpecError) as err:
        Spec.from_dict(_nested(field, value))

    assert err.value.field == field and len(str(err.value)) < 200


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("local.lr", 1e308, "local.lr must be <= 10"),
        ("evaluation.every", 10**18, "evaluation.every must be <= 1000000"),
        ("algorithm.server_lr", 1000.0, "algorithm.server_lr must be <= 100"),
        ("local.weight_decay", 2.0, "local.weight_decay must be <= 1"),
    ],
)
def test_it_says_the_bound(field, value, message):
    with pytest.raises(SpecError, match=f"^{message}$"):
        Spec.from_dict(_nested(field, value))


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"model": {"name": "mlp", "options": {"hidden": 10**9}}}, "model.options.hidden must be <= 65536"),
        ({"model": {"name": "mlp", "hidden": 10**9}}, "model.options.hidden must be <= 65536"),  # a flat spec
        ({"data": {"name": "synthetic", "options": {"alpha": 101.0}}}, "data.options.alpha must be <= 100"),
        ({"data": {"dataset": "synthetic", "synthetic_alpha": 101.0}}, "data.options.alpha must be <= 100"),
        ({"algorithm": {"name": "fedadam", "options": {"tau": 2.0}}}, "algorithm.options.tau must be <= 1"),
        (
            {"communication": {"uplink": {"name": "topk", "options": {"ratio": 0}}}},
            "communication.uplink.options.ratio must be > 0",
        ),
    ],
)
def test_it_says_the_bound_of_a_component_option_by_its_dotted_path(raw, message):
    with pytest.raises(SpecError, match=f"^{message}$"):
        Spec.from_dict(raw)


def test_it_refuses_huge_lists_and_strings_before_reading_them():
    with pytest.raises(SpecError, match=r"^participation\.schedule is too long: at most 1,000,000 entries$"):
        Spec.from_dict({"participation": {"schedule": ["x"] * 1_000_001}})
    with pytest.raises(SpecError, match=r"^data\.options\.path is too long"):
        Spec.from_dict({"data": {"name": "cifar10", "options": {"path": "a" * 5000}}})
    with pytest.raises(SpecError) as err:
        Spec.from_dict({"model": {"name": "x" * 100_000}})
    assert err.value.field == "model.name" and len(str(err.value)) < 200  # the value is not echoed whole


def test_it_still_loads_a_spec_stored_before_the_bounds():
    old = {"local": {"lr": 1e308}, "evaluation": {"every": 10**18}, "model": {"name": "mlp", "hidden": 10**9}}

    spec = Spec.from_stored(old)

    assert spec.local.lr == 1e308 and spec.model.options.hidden == 10**9
    with pytest.raises(SpecError):
        Spec.from_dict(old)
    with pytest.raises(SpecError, match="model.name must be a registered model"):  # types and choices still apply
        Spec.from_stored({"model": {"name": "resnet"}})
