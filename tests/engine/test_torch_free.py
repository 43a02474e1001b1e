"""What a process that only reads specs needs of the engine imports no torch: the spec, its fields, the
round fields and the registry's metadata (every component's name, options, traits and help). torch
comes with the first component built, and only then; a factory may be registered by name for that."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap

import pytest

from fedweb_engine.algorithms import build_algorithm
from fedweb_engine.components import registry
from fedweb_engine.components.plugins import load_plugins
from fedweb_engine.components.registry import RegistryError
from tests.live import ROOT

READ_ONLY = """
import json, sys
from fedweb_engine.components import registry
from fedweb_engine.components.plugins import load_plugins
from fedweb_engine.results.round_fields import FIELDS
from fedweb_engine.results.round_result import ROUND_RESULT_FIELDS
from fedweb_engine.spec.presets import PRESETS, preset_specs
from fedweb_engine.spec.schema import Spec, SpecError, spec_fields

load_plugins()
seen = [(c.kind, c.name, c.help, c.default_options(), dict(c.traits)) for k in registry.KINDS for c in registry.components(k)]
specs = [s for name in PRESETS for s in preset_specs(name)]
checked = 0
for client in registry.names("algorithm"):  # the client algorithm's checks read its traits
    for strategy in ("fedavg", "median"):
        for privacy in ("none", "gaussian"):
            try:
                Spec.from_dict({"algorithm": {"name": strategy, "client": {"name": client}}, "privacy": {"mechanism": privacy}})
            except SpecError:
                pass
            checked += 1
fields = spec_fields()
before = "torch" in sys.modules
registry.get("model", "mlp").factory
print(json.dumps({"components": len(seen), "helps": sum(1 for s in seen if s[2]), "specs": len(specs),
                  "checked": checked, "fields": len(fields), "torch_before": before, "torch_after": "torch" in sys.modules}))
"""


def test_reading_specs_fields_and_the_registry_imports_no_torch_until_a_component_is_built():
    done = subprocess.run([sys.executable, "-c", READ_ONLY], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["components"] == out["helps"] >= 28  # every built-in, each with its help text
    assert out["specs"] >= 5 and out["checked"] == 4 * len(registry.names("algorithm")) and out["fields"] > 50
    assert out["torch_before"] is False
    assert out["torch_after"] is True  # building a model is what brings torch in


def test_the_client_algorithm_traits_the_spec_checks_read_are_what_each_built_algorithm_says():
    for c in registry.components("algorithm"):
        built = build_algorithm(c.name, c.default_options(), num_params=5, device="cpu", lr=0.1)
        assert (c.traits["trivial"], c.traits["changes_update"]) == (built.trivial, built.changes_update), c.name


def test_a_builtins_help_read_from_its_source_is_its_factorys_docstring():
    for kind in registry.KINDS:
        for c in registry.components(kind):
            assert isinstance(c.target, str)  # every built-in is registered by name
            docstring = inspect.getdoc(c.factory) or ""
            assert c.help == docstring.split("\n\n")[0].replace("\n", " ") != "", c.who


@pytest.fixture
def lazy_plugin(tmp_path, monkeypatch):
    """A plugin package whose ``__init__`` registers its model by name; the model's module imports torch."""
    monkeypatch.syspath_prepend(str(tmp_path))
    package = tmp_path / "lazy_plugin"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from fedweb_engine.components import registry\n"
        'registry.model("lazy_m")("lazy_plugin.nets:build")\n'
        'registry.model("lazy_missing")("lazy_plugin.nets:nothing_here")\n'
    )
    (package / "nets.py").write_text(
        textwrap.dedent(
            '''
            from torch import nn

            def build(input_shape, num_classes, options):
                """A linear model, built only when a run asks for it.

                More about it."""
                return nn.Linear(4, num_classes)
            '''
        )
    )
    yield
    for name in ("lazy_m", "lazy_missing"):
        registry.unregister("model", name)
    for module in ("lazy_plugin", "lazy_plugin.nets"):
        sys.modules.pop(module, None)


def test_a_plugin_may_register_its_factory_by_name_which_is_imported_when_first_built(lazy_plugin):
    load_plugins({"FEDWEB_PLUGINS": "lazy_plugin"})
    component = registry.get("model", "lazy_m")
    assert (component.plugin, component.help) == ("lazy_plugin", "A linear model, built only when a run asks for it.")
    assert "lazy_plugin.nets" not in sys.modules  # its help was read from the source, not by importing it
    assert component.factory((4,), 3, component.default_options()).out_features == 3
    missing = registry.get("model", "lazy_missing")
    with pytest.raises(RegistryError, match=r"plugin 'lazy_plugin': model 'lazy_missing': 'lazy_plugin.nets:nothing_here'"
                                            r": module lazy_plugin.nets has no nothing_here"):  # fmt: skip
        missing.factory((4,), 3, missing.default_options())


def test_a_malformed_factory_name_is_refused_when_it_registers():
    with pytest.raises(
        RegistryError, match=r"model 'lazy_bad': a factory reference must be 'package.module:attribute'"
    ):
        registry.model("lazy_bad")("lazy_plugin_nets.build")
    assert "lazy_bad" not in registry.names("model")
