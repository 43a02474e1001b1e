"""The demo experiments say what they run: their descriptions are read from their scaled-down specs."""

from fedweb_engine.spec.presets import preset_spec
from orchestrator.management.commands.demo import FINISHED_DEMOS, describe


def test_it_describes_each_demo_from_its_own_spec():
    for preset, changes in FINISHED_DEMOS.items():
        spec = preset_spec(preset).replace(compute={"device": "cpu"}, **changes)
        text = describe(preset, spec)
        assert f"{spec.rounds} rounds of {spec.algorithm.name}" in text, preset
        assert f"over {spec.data.num_clients} clients" in text and f"the {spec.model.name} model" in text, preset
    quickstart = preset_spec("quickstart").replace(compute={"device": "cpu"}, **FINISHED_DEMOS["quickstart"])
    assert "8×8 digits" in describe("quickstart", quickstart) and "28×28" not in describe("quickstart", quickstart)


def test_the_fedprox_demo_says_its_clients_are_fedprox_with_their_mu():
    spec = preset_spec("fedprox-stragglers").replace(compute={"device": "cpu"}, **FINISHED_DEMOS["fedprox-stragglers"])
    assert "rounds of fedavg with fedprox clients (μ = 1)," in describe("fedprox-stragglers", spec)
