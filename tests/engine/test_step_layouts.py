"""The eager step computes a linear layer's weight gradient in the weight's own layout ([n, out, in]),
as the compacted loop's ``grad`` under ``vmap`` does, not as autograd's ``bmm`` rule would
([n, in, out], then transposed): MKL ran the latter about 4x slower on an AMD EPYC
(benchmarks/README.md, engine_overhead)."""

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec


class BmmOutputs(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.bmm.default:
            self.shapes.append(tuple(out.shape))
        return out


def test_the_eager_step_takes_the_weight_gradient_in_the_weights_layout():
    spec = Spec.from_dict({
        "rounds": 1, "data": {"dataset": "digits", "num_clients": 8, "image_size": 8},
        "model": {"name": "logistic"}, "participation": {"clients_per_round": 4},
        "compute": {"device": "cpu", "training": "vectorized", "compile": "off"},
    })  # fmt: skip
    sim = Simulation(spec)
    seen = BmmOutputs()

    with seen:
        sim.next_round()

    # logistic 64 -> 10: the forward gives [n, B, 10]; the weight's gradient must come out [n, 10, 64].
    assert seen.shapes and all(s[1:] != (64, 10) for s in seen.shapes), seen.shapes
    assert any(s[1:] == (10, 64) for s in seen.shapes)
