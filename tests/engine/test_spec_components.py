"""The spec's component sections: names from the registry, options validated with dotted errors,
flat specs from before components upgraded, and a plugin's component selectable like a built-in."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.models import build_model
from fedweb_engine.spec import legacy as spec_legacy
from fedweb_engine.spec.presets import preset_specs
from fedweb_engine.spec.schema import Spec, SpecError, option_key, spec_fields

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_full_dump_of_the_old_default_spec_loads_as_todays_default():
    old = json.loads((FIXTURES / "legacy_default_spec.json").read_text())

    spec = Spec.from_dict(old)

    # compute.compile was a boolean: its old default, false, loads as "off", so a stored run keeps
    # training eagerly as it did (today's default is "auto").
    assert old["compute"]["compile"] is False
    assert spec == Spec().replace(compute={"compile": "off"})
    assert Spec.from_dict(spec.to_dict()) == spec  # to_dict writes today's shape, which loads back
    assert spec.to_dict()["model"] == {"name": "cnn", "options": {}}


def test_every_old_preset_upgrades_to_the_same_specs_as_todays_presets():
    old = json.loads((FIXTURES / "legacy_presets.json").read_text())
    for name, preset in old.items():
        today = [spec.replace(compute={"compile": "off"}) for spec in preset_specs(name)]  # false was the default
        assert [Spec.from_dict(d) for d in preset["full"]] == today, name


def test_old_option_keys_move_into_the_chosen_component_and_a_stored_spec_drops_the_others():
    flat = {
        "model": {"name": "vgg", "hidden": 200, "blocks": 3, "width": 8},
        "data": {"dataset": "synthetic", "synthetic_alpha": 0.5, "synthetic_beta": 2.0, "image_size": 8, "path": None},
        "algorithm": {"name": "fedavgm", "server_momentum": 0.7, "beta1": 0.9, "tau": 0.1},
        "communication": {"uplink": "topk", "downlink": "int8", "topk_ratio": 0.05},
    }

    upgraded = spec_legacy.upgrade(flat)

    assert upgraded["model"] == {"name": "vgg", "options": {"blocks": 3, "width": 8}}
    assert upgraded["data"] == {"name": "synthetic", "options": {"alpha": 0.5, "beta": 2.0}}
    assert upgraded["algorithm"] == {"name": "fedavgm", "options": {"momentum": 0.7}}
    assert upgraded["communication"] == {
        "uplink": {"name": "topk", "options": {"ratio": 0.05}},
        "downlink": {"name": "int8"},
    }
    assert flat["model"]["hidden"] == 200  # the input is left as it was
    spec = Spec.from_stored(flat)
    assert spec.model.options.width == 8 and spec.communication.uplink.options.ratio == 0.05
    # A new spec may not carry a non-default value the chosen component ignores (image_size 8).
    with pytest.raises(
        SpecError, match=r"^data\.image_size is not an option of dataset 'synthetic': its options are alpha, beta"
    ):
        Spec.from_dict(flat)


@pytest.mark.parametrize(
    "raw, field, options",
    [
        ({"model": {"name": "mlp", "width": 1e308}}, "model.width", "hidden"),
        ({"data": {"name": "digits", "path": "../../etc/passwd"}}, "data.path", "image_size"),
        ({"algorithm": {"name": "fedavg", "beta1": 0.5}}, "algorithm.beta1", "none"),
        ({"model": {"name": "cnn", "hidden": 64}}, "model.hidden", "none"),
    ],
)
def test_a_new_spec_with_an_old_key_its_component_lacks_is_refused_naming_the_real_options(raw, field, options):
    with pytest.raises(SpecError) as err:
        Spec.from_dict(raw)

    assert err.value.field == field
    assert f"its options are {options}" in str(err.value)
    Spec.from_stored(raw)  # stored before: still loads, the key dropped as it always was


def test_old_keys_that_map_keep_mapping_in_a_new_spec():
    spec = Spec.from_dict({"model": {"name": "vgg", "width": 8}, "algorithm": {"name": "fedprox", "mu": 0.3}})

    assert spec.model.options.width == 8 and spec.algorithm.mu == 0.3


def test_an_unknown_old_key_is_still_refused_by_name():
    with pytest.raises(SpecError, match=r"^model\.depth is not a known field; model 'mlp' has the options hidden"):
        Spec.from_dict({"model": {"name": "mlp", "depth": 3}})


@pytest.mark.parametrize(
    "raw, field, message",
    [
        ({"model": {"name": "vgg", "options": {"width": 0}}}, "model.options.width", "must be >= 1"),
        ({"model": {"name": "vgg", "options": {"foo": 1}}}, "model.options.foo", "is not a known field"),
        ({"model": {"name": "cnn", "options": {"width": 4}}}, "model.options.width", "is not a known field"),
        ({"model": {"name": "resnet"}}, "model.name", "must be a registered model"),
        ({"algorithm": {"name": "fedsgd"}}, "algorithm.name", "must be a registered strategy"),
        ({"communication": {"uplink": {"name": "zip"}}}, "communication.uplink.name", "must be a registered codec"),
        ({"model": {"name": "mlp", "options": 3}}, "model.options", "must be an object"),
        ({"data": {"name": "emnist_h5"}}, "data.options.path", "is required for the emnist_h5 dataset"),
        ({"data": {"partition": "natural"}}, "data.partition", "'natural' needs a dataset with writers"),
        ({"model": {"name": "lm14m"}}, "model.name", "lm model and digits a classification dataset"),
    ],
)
def test_it_names_the_dotted_field_of_a_bad_component_choice(raw, field, message):
    with pytest.raises(SpecError) as err:
        Spec.from_dict(raw)
    assert err.value.field == field and message in str(err.value)


def test_it_maps_an_option_error_to_the_selected_components_field():
    spec = {"model": {"name": "vgg", "options": {}}, "communication": {"uplink": {"name": "topk"}}}
    assert option_key("model.options.width", spec) == "model.options.vgg.width"
    assert option_key("communication.uplink.options.ratio", spec) == "communication.uplink.options.topk.ratio"
    assert option_key("data.alpha", spec) == "data.alpha"
    assert option_key("model.options.width", spec) in spec_fields()


@dataclass(frozen=True)
class TinyOptions:  # no `from __future__` in the plugin's view: real types, as a plugin may write
    width: int = option(3, "Hidden units.", min=1, max=64)
    scale: float = 1.0


@pytest.fixture
def tiny_model():
    @registry.model("tiny_test_net", TinyOptions)
    def tiny(input_shape, num_classes, options):
        n = 1
        for side in input_shape:
            n *= side
        return torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(n, options.width), torch.nn.Linear(options.width, num_classes)
        )

    yield "tiny_test_net"
    registry.unregister("model", "tiny_test_net")


def test_a_plugin_model_is_selectable_validated_and_listed(tiny_model):
    TinyOptions.__dataclass_fields__["scale"].type = float  # as without `from __future__ import annotations`

    spec = Spec.from_dict({"model": {"name": tiny_model, "options": {"width": 5, "scale": 2}}})

    assert spec.model.options == TinyOptions(width=5, scale=2.0)
    with pytest.raises(SpecError, match=r"^model\.options\.width must be <= 64$"):
        Spec.from_dict({"model": {"name": tiny_model, "options": {"width": 65}}})
    fields = spec_fields()
    assert tiny_model in fields["model.name"]["choices"]
    assert fields[f"model.options.{tiny_model}.width"]["applies_when"] == [{"model.name": [tiny_model]}]
    assert fields[f"model.options.{tiny_model}.scale"]["type"] == "float"


def test_a_plugin_model_gets_the_same_weights_from_the_same_generator_and_spares_the_global_rng(tiny_model):
    spec = Spec.from_dict({"model": {"name": tiny_model}}).model
    torch.manual_seed(0)
    expected = torch.rand(2)
    torch.manual_seed(0)

    a = build_model(spec, (1, 4, 4), 3, generator=torch.Generator().manual_seed(1))
    b = build_model(spec, (1, 4, 4), 3, generator=torch.Generator().manual_seed(1))

    assert torch.equal(torch.rand(2), expected)
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
