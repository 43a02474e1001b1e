"""What a spec uses, what an experiment records of it, and when a worker's plugins match it."""

from fedweb_engine.components.provenance import components_used, label, missing, spec_provenance
from fedweb_engine.spec.schema import Spec
from tests.conftest import TINY_SPEC

NEW_SHAPE = {
    "model": {"name": "test_mlp", "options": {"hidden": 8}},
    "data": {"name": "digits", "options": {}, "num_clients": 4},
    "algorithm": {"name": "fedavg", "options": {}},
    "communication": {"uplink": {"name": "topk", "options": {}}, "downlink": {"name": "fp32", "options": {}}},
}


def test_it_reads_the_components_of_todays_flat_spec_typed_or_stored():
    # The client algorithm (algorithm.client, FedAvg's by default) is a component too.
    expected = {
        "model": ["mlp"],
        "dataset": ["digits"],
        "strategy": ["fedavg"],
        "algorithm": ["fedavg"],
        "codec": ["fp32"],
    }
    spec = Spec.from_dict(TINY_SPEC)
    assert components_used(spec) == expected
    assert components_used(spec.to_dict()) == expected


def test_it_reads_the_components_of_the_component_shaped_spec():
    assert components_used(NEW_SHAPE) == {
        "model": ["test_mlp"], "dataset": ["digits"], "strategy": ["fedavg"], "codec": ["topk", "fp32"],
    }  # fmt: skip


def test_it_records_the_plugin_components_a_spec_uses_and_leaves_built_ins_out(test_plugin):
    assert spec_provenance(NEW_SHAPE) == test_plugin
    [recorded] = test_plugin
    assert recorded["plugin"] == "fedweb_test_plugin" and len(recorded["hash"]) == 16
    assert spec_provenance(TINY_SPEC) == []


def test_a_worker_with_the_same_source_has_the_plugin_whatever_version_it_reports():
    recorded = [{"kind": "model", "name": "m", "plugin": "p", "version": "1.2.0", "hash": "abc"}]
    assert missing(recorded, [{"name": "p", "version": "1.3.0", "hash": "abc", "components": []}]) == []
    lacking = [{"plugin": "p", "version": "1.2.0", "hash": "abc"}]
    assert missing(recorded, [{"name": "p", "version": "1.2.0", "hash": "def", "components": []}]) == lacking
    assert missing(recorded, [{"name": "other", "version": "1.2.0", "hash": "abc", "components": []}]) == lacking
    assert missing(recorded, []) == lacking


def test_the_version_decides_only_for_a_plugin_without_source_to_hash():
    recorded = [{"kind": "codec", "name": "c", "plugin": "p", "version": "2.0", "hash": None}]
    assert missing(recorded, [{"name": "p", "version": "2.0", "hash": None}]) == []
    assert missing(recorded, [{"name": "p", "version": "2.1", "hash": None}]) != []


def test_two_components_of_one_plugin_need_it_once_and_are_labelled_by_version_or_hash():
    recorded = [
        {"kind": "model", "name": "a", "plugin": "p", "version": None, "hash": "abc"},
        {"kind": "codec", "name": "b", "plugin": "p", "version": None, "hash": "abc"},
    ]
    [need] = missing(recorded, [])
    assert label(need) == "p abc"
    assert label({"plugin": "p", "version": "1.2.0", "hash": "abc"}) == "p 1.2.0"
