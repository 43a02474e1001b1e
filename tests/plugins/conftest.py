"""The test plugin (``tests/plugins_fixture/fedweb_test_plugin``) loaded into this process, and
the provenance records the routing tests give experiments and workers."""

import sys

import pytest

from fedweb_engine.components import registry
from tests.live import ROOT

FIXTURE_DIR = ROOT / "tests" / "plugins_fixture"

# What an experiment records of the plugin model it uses, and what a worker that has it reports.
RECORDED = [{"kind": "model", "name": "test_mlp", "plugin": "fedweb_test_plugin", "version": "1.2.0", "hash": "abc"}]
HAS_IT = [{"name": "fedweb_test_plugin", "version": "1.2.0", "hash": "abc", "components": ["model:test_mlp"]}]


@pytest.fixture
def test_plugin(monkeypatch):
    """Load the test plugin as FEDWEB_PLUGINS would; yields its provenance as an experiment records it."""
    from fedweb_engine.components.plugins import load_plugins

    monkeypatch.syspath_prepend(str(FIXTURE_DIR))
    load_plugins({"FEDWEB_PLUGINS": "fedweb_test_plugin"})
    yield registry.spec_plugins({"model": ["test_mlp"]})
    registry.unregister("model", "test_mlp")
    sys.modules.pop("fedweb_test_plugin", None)
