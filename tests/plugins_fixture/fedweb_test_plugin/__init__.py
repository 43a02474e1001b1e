"""A FedWeb plugin for tests: registers a small model, ``test_mlp``.

Not a package of the test suite: tests put ``tests/plugins_fixture`` on ``sys.path`` (or a
worker's PYTHONPATH) and load it as ``FEDWEB_PLUGINS=fedweb_test_plugin``, as a team would.
"""

from dataclasses import dataclass

from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


@dataclass(frozen=True)
class TestMLPOptions:
    hidden: int = option(16, "Units of the hidden layer.", min=1, max=1024)


@registry.model("test_mlp", TestMLPOptions)
def test_mlp(input_shape, num_classes, options):
    """A one-hidden-layer perceptron over the flattened input."""
    size = 1
    for d in input_shape:
        size *= d
    return nn.Sequential(
        nn.Flatten(), nn.Linear(size, options.hidden), nn.ReLU(), nn.Linear(options.hidden, num_classes)
    )
