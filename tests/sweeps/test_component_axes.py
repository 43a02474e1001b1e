"""Sweep axes over components: today's option names, the per-component form keys and the old
flat names all expand to the same specs, and switching components drops the other's options."""

from __future__ import annotations

import pytest

from orchestrator.sweeps.expand import SweepError, expand
from tests.conftest import TINY_SPEC

VGG = {**TINY_SPEC, "model": {"name": "vgg", "options": {"blocks": 1}}}


@pytest.mark.parametrize("axis", ["model.options.width", "model.options.vgg.width", "model.width"])
def test_an_option_axis_reaches_the_selected_component_by_any_of_its_names(axis):
    runs = expand(VGG, {axis: [1, 2]})
    assert [s.model.options.width for _, s in runs] == [1, 2]
    assert all(s.model.options.blocks == 1 for _, s in runs)


def test_the_old_topk_ratio_axis_sets_the_ratio_of_the_links_using_topk():
    base = {**TINY_SPEC, "communication": {"uplink": "topk"}}
    runs = expand(base, {"communication.topk_ratio": [0.1, 0.2]})
    assert [s.communication.uplink.options.ratio for _, s in runs] == [0.1, 0.2]
    assert all(s.communication.downlink.name == "fp32" for _, s in runs)


def test_a_model_axis_drops_the_options_the_other_model_lacks():
    runs = expand(VGG, {"model.name": ["cnn", "vgg"]})
    # cnn has no options: vgg's blocks would be refused as an unknown field had it been kept
    assert [s.model.name for _, s in runs] == ["cnn", "vgg"]
    assert runs[1][1].model.options.blocks == 1


def test_an_axis_naming_no_option_of_any_component_is_refused():
    with pytest.raises(SweepError) as err:
        expand(VGG, {"model.options.depth": [1, 2]})
    assert "axes.model.options.depth is not a spec field" in str(err.value)


@pytest.mark.parametrize("axis", ["model.options.width", "model.options.vgg.width", "model.width"])
def test_runs_of_an_option_axis_group_by_its_value_whichever_name_the_axis_uses(axis):
    from orchestrator.sweeps.stats import value_at

    stored = [spec.to_dict() for _, spec in expand(VGG, {axis: [1, 2]})]  # what the runs keep
    assert [value_at(s, axis) for s in stored] == [1, 2]
    assert value_at(stored[0], "model.name") == "vgg" and value_at(stored[0], "model.options.depth") is None


def test_the_old_topk_ratio_axis_reads_the_ratio_of_the_link_using_topk():
    from orchestrator.sweeps.stats import value_at

    base = {**TINY_SPEC, "communication": {"uplink": "topk"}}
    stored = [spec.to_dict() for _, spec in expand(base, {"communication.topk_ratio": [0.1, 0.2]})]
    assert [value_at(s, "communication.topk_ratio") for s in stored] == [0.1, 0.2]
