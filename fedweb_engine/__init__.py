"""FedWeb's federated-learning engine: plain PyTorch and NumPy, no Django, Celery or Channels.

Public API::

    from fedweb_engine import Spec, Simulation, RoundResult
    sim = Simulation(Spec.from_dict({...}))
    result = sim.next_round()          # one RoundResult
    sim.save_checkpoint(path)         # safetensors + JSON metadata, no pickle
    sim = Simulation.from_checkpoint(path)

Run ``python -m fedweb_engine --help`` for the command line.
"""

from fedweb_engine.results.round_result import ROUND_RESULT_FIELDS, RoundResult
from fedweb_engine.spec.schema import Spec, SpecError

__all__ = ["ROUND_RESULT_FIELDS", "RoundResult", "Spec", "SpecError", "Simulation"]


def __getattr__(name):
    if name == "Simulation":
        # why: Simulation pulls in torch; keep `import fedweb_engine` for the spec cheap.
        from fedweb_engine.simulation.runner import Simulation

        return Simulation
    raise AttributeError(name)
