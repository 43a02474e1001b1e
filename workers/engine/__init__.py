"""FedWeb's federated-learning engine: plain PyTorch and NumPy, no Django, Celery or Channels.

Public API::

    from workers.engine import Spec, Simulation, RoundResult, presets
    sim = Simulation(Spec.from_dict({...}))
    result = sim.next_round()          # one RoundResult
    sim.save_checkpoint(path)         # safetensors + JSON metadata, no pickle
    sim = Simulation.from_checkpoint(path)

Run ``python -m workers.engine --help`` for the command line.
"""

from workers.engine.result import ROUND_RESULT_FIELDS, RoundResult
from workers.engine.spec import Spec, SpecError

__all__ = ["ROUND_RESULT_FIELDS", "RoundResult", "Spec", "SpecError", "Simulation"]


def __getattr__(name):
    if name == "Simulation":
        # why: Simulation pulls in torch; keep `import workers.engine` for the spec cheap.
        from workers.engine.runner import Simulation

        return Simulation
    raise AttributeError(name)
