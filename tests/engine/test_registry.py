"""The component registry: what a plugin author meets when registering goes wrong, and what the
rest of FedWeb reads from it."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass

import pytest

from fedweb_engine.components import registry
from fedweb_engine.components.plugins import PluginError, load_plugins
from fedweb_engine.components.registry import RegistryError, UnknownComponent, option


@dataclass(frozen=True)
class WidthOptions:
    width: int = option(4, "Width.", min=1, max=64)


@pytest.fixture
def cleanup():
    added: list[tuple[str, str]] = []
    yield added
    for kind, name in added:
        registry.unregister(kind, name)


def test_the_builtins_are_registered_per_kind_in_form_order():
    assert registry.names("model")[:5] == ("logistic", "mlp", "cnn", "vgg", "lm14m")
    assert {"fedavg", "fedadam", "median", "trimmed_mean", "krum"} <= set(registry.names("strategy"))
    assert set(registry.names("codec")) >= {"fp32", "fp16", "int8", "topk"}
    assert "npz" in registry.names("dataset") and all(c.builtin for c in registry.components("dataset"))
    assert [registry.get("codec", n).traits["codec_id"] for n in ("fp32", "fp16", "int8", "topk")] == [1, 2, 3, 4]


def test_a_name_is_taken_once_and_the_error_names_who_holds_it(cleanup):
    @registry.model("reg_test_a", WidthOptions)
    def first(input_shape, num_classes, options):
        return None

    cleanup.append(("model", "reg_test_a"))
    with pytest.raises(RegistryError, match="already registered by"):

        @registry.model("reg_test_a")
        def second(input_shape, num_classes, options):
            return None

    with pytest.raises(RegistryError, match="already registered by fedweb_engine"):
        registry.model("cnn")(lambda input_shape, num_classes, options: None)
    assert registry.get("model", "reg_test_a").factory is first  # the first one stays


def test_options_must_be_a_frozen_dataclass_with_defaults():
    @dataclass
    class Mutable:
        width: int = 1

    @dataclass(frozen=True)
    class NoDefault:
        width: int

    with pytest.raises(RegistryError, match="frozen dataclass"):
        registry.model("reg_bad_a", Mutable)
    with pytest.raises(RegistryError, match="needs a default"):
        registry.model("reg_bad_b", NoDefault)
    with pytest.raises(RegistryError, match="name must be"):
        registry.model("has space")
    with pytest.raises(RegistryError, match="task must be"):
        registry.dataset("reg_bad_c", task="regression")


def test_codec_ids_are_checked_and_unique(cleanup):
    with pytest.raises(RegistryError, match="codec_id must be an integer from 1 to 255"):
        registry.codec("reg_codec_a")(lambda layout, options: None)
    with pytest.raises(RegistryError, match="already used by 'fp32'"):
        registry.codec("reg_codec_b", codec_id=1)(lambda layout, options: None)


def test_an_unknown_name_lists_the_registered_ones():
    with pytest.raises(UnknownComponent, match="unknown model 'nope'; registered: logistic, mlp, cnn"):
        registry.get("model", "nope")
    with pytest.raises(ValueError, match="kind must be one of"):
        registry.get("optimizer", "sgd")


def test_a_plugin_reports_its_components_and_the_hash_of_the_code_it_loaded(tmp_path, monkeypatch):
    package = tmp_path / "reg_plugin_pkg"
    package.mkdir()
    source = textwrap.dedent(
        """
        from fedweb_engine.components import registry

        @registry.strategy("reg_plugin_strategy", moments=1)
        def build(*, num_params, device, lr, options):
            '''A server step.'''
            from fedweb_engine.strategies import FedAvg
            return FedAvg(num_params=num_params, device=device, lr=lr)
        """
    )
    (package / "__init__.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        load_plugins({"FEDWEB_PLUGINS": "reg_plugin_pkg"})
        component = registry.get("strategy", "reg_plugin_strategy")
        assert component.plugin == "reg_plugin_pkg" and not component.builtin and component.help == "A server step."
        [info] = [p for p in registry.installed_plugins() if p["name"] == "reg_plugin_pkg"]
        assert info["components"] == ["strategy:reg_plugin_strategy"] and info["version"] is None
        loaded_hash = info["hash"]
        (package / "__init__.py").write_text(source + "\n# edited while the process runs\n")
        # The process still runs the code it imported: its hash does not follow the file.
        assert registry.source_hash("reg_plugin_pkg") == loaded_hash
        assert registry.spec_plugins({"strategy": "reg_plugin_strategy", "model": ["cnn"]}) == [
            {
                "kind": "strategy",
                "name": "reg_plugin_strategy",
                "plugin": "reg_plugin_pkg",
                "version": None,
                "hash": loaded_hash,
            }
        ]
    finally:
        registry.unregister("strategy", "reg_plugin_strategy")
        sys.modules.pop("reg_plugin_pkg", None)


def test_a_plugin_that_fails_to_import_is_named_with_its_error(tmp_path, monkeypatch):
    (tmp_path / "reg_broken.py").write_text("raise RuntimeError('no GPU driver here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=r"module 'reg_broken' failed to import: RuntimeError: no GPU driver here"):
        load_plugins({"FEDWEB_PLUGINS": " reg_broken , "})
    with pytest.raises(PluginError, match="'reg_missing' failed to import: ModuleNotFoundError"):
        load_plugins({"FEDWEB_PLUGINS": "reg_missing"})
