import json

import pytest

from workers.engine.presets import PRESETS, preset_spec
from workers.engine.spec import Spec, SpecError, field_help


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
        ({"data": {"dataset": "cifar10"}}, "data.path"),
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
    help = field_help()

    assert help["data.alpha"]["default"] == 0.5
    assert help["local.batch_size"]["type"] == "int"
    assert all(meta["help"] for meta in help.values())


def test_it_builds_every_preset():
    for name in PRESETS:
        assert preset_spec(name).rounds >= 1
