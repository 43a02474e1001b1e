"""A plugin's option metadata is judged when it registers, its help never reads "None", and a
plugin dataset the form cannot preview gets a "not previewed" answer (issue 21, plugins and docs)."""

from __future__ import annotations

from dataclasses import dataclass, make_dataclass

import pytest
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import RegistryError, option
from fedweb_engine.data.pool import Pool
from orchestrator.web.forms.experiment_forms import ExperimentForm
from tests.web.test_forms import form_data


def _options(type_, default, **meta) -> type:
    return make_dataclass("Opts", [("x", type_, option(default, "An option.", **meta))], frozen=True)


@pytest.mark.parametrize(
    "type_, default, meta, message",
    [
        (float, 0.5, {"min_open": 0.0, "max": 10.0}, "has min_open=0.0: it is True or False"),
        (float, 0.5, {"min_open": True, "max": 10.0}, "has min_open=True without min"),
        (float, 0.5, {"min": 2.0, "max": 1.0}, "has min=2.0 above max=1.0"),
        (int, 50, {"min": 0, "max": 10}, "has a default 50 its own constraints refuse (must be <= 10)"),
        (float, 0.0, {"min": 0.0, "min_open": True}, "has a default 0.0 its own constraints refuse (must be > 0.0)"),
        (float, 0.5, {"min": "0"}, "has min='0': it must be a finite number"),
        (float, 0.5, {"max": float("inf")}, "has max=inf: it must be a finite number"),
        (str, "a", {"min": 1}, "has min on a str option: bounds are for numbers"),
        (str, "c", {"choices": ("a", "b")}, "has a default 'c' its own constraints refuse"),
        (str, "a", {"choices": ()}, "has choices=(): give a non-empty list"),
        (str, "a", {"max_length": 0}, "has max_length=0: it must be a positive integer"),
        (tuple, None, {"nullable": True}, "has type"),
    ],
)
def test_an_option_whose_metadata_makes_no_sense_fails_at_registration_naming_it(type_, default, meta, message):
    opts = _options(type_, default, **meta)

    with pytest.raises(RegistryError) as err:
        registry.model("bad_meta_model", opts)

    assert str(err.value).startswith("model 'bad_meta_model': option 'x' ") and message in str(err.value)
    assert "bad_meta_model" not in registry.names("model")


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


@pytest.fixture
def plugin_components():
    added: list[tuple[str, str]] = []
    yield added
    for kind, name in added:
        registry.unregister(kind, name)


def test_the_help_of_an_option_with_only_a_max_names_only_the_max(plugin_components):
    @registry.model("max_only_model", _options(float, 0.5, max=10.0))
    def max_only_model(input_shape, num_classes, options):
        return None

    plugin_components.append(("model", "max_only_model"))
    help_text = ExperimentForm().fields["model__options__max_only_model__x"].help_text

    assert "Range: <= 10.0." in help_text and "None" not in help_text


@dataclass(frozen=True)
class NoDescribeOptions:
    rows: int = option(40, "Rows.", min=1, max=1000)


@pytest.mark.django_db
def test_a_plugin_dataset_without_describe_is_answered_not_previewed(alice_client, plugin_components):
    @registry.dataset("no_describe_data", NoDescribeOptions)
    def no_describe_data(options, rng):
        # The capacity check loads it once to learn its size (the registry's contract).
        x = torch.rand(options.rows, 4)
        return Pool(x, torch.arange(options.rows) % 2, None, None, num_classes=2, input_shape=(4,))

    plugin_components.append(("dataset", "no_describe_data"))
    query = form_data(data__name="no_describe_data", model__name="logistic")

    response = alice_client.get("/experiments/new/partition.json", query)

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["previewed"] is False
    assert body["reason"] == "no_describe_data does not describe its size (describe=); its partition is not previewed"
