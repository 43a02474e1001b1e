"""Contracts checked at registration (pluggy's _verify_hook): a component whose factory or methods
do not fit its kind's protocol is refused when its plugin is imported, with the plugin, the
component and the method named; every built-in fits."""

from __future__ import annotations

import sys
import textwrap

import pytest

from fedweb_engine.components import contracts, registry
from fedweb_engine.components.plugins import PluginError, load_plugins
from fedweb_engine.components.registry import RegistryError
from fedweb_engine.spec.schema import AlgorithmSpec

HEADER = """
from fedweb_engine.components import registry
from fedweb_engine.strategies import FedAvg
from fedweb_engine.strategies.robust import RobustStrategy
from fedweb_engine.algorithms import ClientAlgorithm
"""


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Write a plugin module and load it as FEDWEB_PLUGINS would; what it registered is removed after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names: list[str] = []

    def load(name: str, body: str):
        (tmp_path / f"{name}.py").write_text(HEADER + textwrap.dedent(body))
        names.append(name)
        return load_plugins({"FEDWEB_PLUGINS": name})

    yield load
    for kind in registry.KINDS:
        for c in registry.components(kind):
            if c.plugin in names:
                registry.unregister(kind, c.name)
    for name in names:
        sys.modules.pop(name, None)


def test_a_streaming_strategy_whose_step_takes_every_update_stops_start_up_naming_plugin_and_method(plugin):
    body = """
    @registry.strategy("contract_median")
    class Median(FedAvg):
        def __init__(self, *, num_params, device, lr, options):
            super().__init__(num_params=num_params, device=device, lr=lr)

        def step(self, global_flat, updates, weights):
            global_flat.add_(updates.median(dim=0).values)
    """
    with pytest.raises(PluginError) as raised:
        plugin("contract_bad_step", body)
    message = str(raised.value)
    assert "module 'contract_bad_step' failed to import: ContractError: plugin 'contract_bad_step'" in message
    assert "strategy 'contract_median': method Median.step(self, global_flat, updates, weights)" in message
    assert "does not fit StreamingStrategy.step(global_flat, avg_update)" in message
    assert "contract_median" not in registry.names("strategy")  # nothing half-registered


def test_a_whole_cohort_strategy_whose_step_takes_the_mean_is_refused(plugin):
    body = """
    @registry.strategy("contract_cohort", needs_updates=True)
    class Cohort(FedAvg):
        def __init__(self, *, num_params, device, lr, options):
            super().__init__(num_params=num_params, device=device, lr=lr)
    """
    with pytest.raises(PluginError, match=r"method Cohort\.step\(self, global_flat, avg_update\) does not fit "
                                          r"CohortStrategy\.step\(global_flat, updates, weights\)"):  # fmt: skip
        plugin("contract_bad_cohort", body)


def test_a_strategy_factory_that_cannot_take_the_engines_call_is_refused(plugin):
    body = """
    @registry.strategy("contract_factory")
    def factory(num_params, device):
        return FedAvg(num_params=num_params, device=device)
    """
    with pytest.raises(PluginError, match=r"strategy 'contract_factory': its factory factory\(num_params, device\) "
                                          r"does not fit the engine's call \(num_params=…, device=…, lr=…, options=…\)"):  # fmt: skip
        plugin("contract_bad_factory", body)


def test_a_function_factory_is_checked_by_its_return_annotation_or_else_when_first_built(plugin):
    body = """
    class NoStep:
        def __init__(self, **kw):
            pass

        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    @registry.strategy("contract_annotated")
    def annotated(*, num_params, device, lr, options) -> NoStep:
        return NoStep()
    """
    with pytest.raises(PluginError, match=r"strategy 'contract_annotated': NoStep has no method step\(global_flat, "):
        plugin("contract_annotated", body)
    unannotated = body.replace("contract_annotated", "contract_later").replace(" -> NoStep", "")
    plugin("contract_later", unannotated)  # nothing says what it builds yet
    with pytest.raises(RegistryError, match=r"plugin 'contract_later': strategy 'contract_later': NoStep has no "
                                            r"method step"):  # fmt: skip
        from fedweb_engine.strategies import build_strategy

        build_strategy(AlgorithmSpec(name="contract_later"), num_params=3, device="cpu")


def test_a_client_algorithm_hook_with_other_arguments_is_refused(plugin):
    body = """
    @registry.algorithm("contract_algo")
    class Drift(ClientAlgorithm):
        corrects = True

        def correct(self, g, w):
            g.add_(w)
    """
    with pytest.raises(PluginError, match=r"algorithm 'contract_algo': method Drift\.correct\(self, g, w\) does not "
                                          r"fit ClientAlgorithmHooks\.correct\(g, w, start, ctx\)"):  # fmt: skip
        plugin("contract_bad_algo", body)


@pytest.mark.parametrize(
    ("kind", "registration", "function", "message"),
    [
        ("codec", 'registry.codec("contract_c", codec_id=250)', "def f(layout):",
         r"codec 'contract_c': its factory f\(layout\) does not fit the engine's call \(layout, options\)"),
        ("model", 'registry.model("contract_m")', "def f(input_shape, options):",
         r"model 'contract_m': its factory f\(input_shape, options\) does not fit the engine's call "
         r"\(input_shape, num_classes, options\)"),
        ("dataset", 'registry.dataset("contract_d")', "def f(options, rng, context):",
         r"dataset 'contract_d': its factory f\(options, rng, context\) does not fit the engine's call \(options, rng\)"),
        ("dataset", 'registry.dataset("contract_d", describe=lambda: None)', "def f(options, rng):",
         r"dataset 'contract_d': describe <lambda>\(\) does not fit the engine's call \(options\)"),
    ],
)  # fmt: skip
def test_codecs_models_and_datasets_are_checked_the_same_way(plugin, kind, registration, function, message):
    body = f"""
    @{registration}
    {function}
        return None
    """
    with pytest.raises(PluginError, match=message):
        plugin(f"contract_bad_{kind}", body)


def test_every_builtin_fits_its_contract_and_builds_what_its_protocol_says():
    for kind in registry.KINDS:
        for component in registry.components(kind):
            assert component.builtin
            contracts.check_factory(component.who, component.factory, kind, component.traits)
    for component in registry.components("strategy"):
        options = component.default_options()
        built = component.factory(num_params=4, device="cpu", lr=1.0, options=options)
        contracts.check_methods(component.who, type(built), contracts.strategy_protocol(component.traits))
    for component in registry.components("codec"):
        built = component.factory([3, 1], component.default_options())
        contracts.check_methods(component.who, type(built), contracts.CodecProtocol)
    for component in registry.components("algorithm"):
        built = component.factory(num_params=4, device="cpu", lr=0.1, options=component.default_options())
        contracts.check_methods(component.who, type(built), contracts.ClientAlgorithmHooks)


def test_the_robust_strategies_are_whole_cohort_and_the_others_streaming():
    kinds = {c.name: contracts.strategy_protocol(c.traits).__name__ for c in registry.components("strategy")}
    assert {kinds[n] for n in ("median", "trimmed_mean", "krum")} == {"CohortStrategy"}
    assert {kinds[n] for n in ("fedavg", "fedavgm", "fedadam", "fedyogi", "fedadagrad")} == {"StreamingStrategy"}
