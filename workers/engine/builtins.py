"""The built-in components: importing this module registers them (``registry.ensure_builtins``).

They register exactly as a plugin does, with the decorators of :mod:`workers.engine.registry`,
each in (or beside) its own module; the order of the imports is the order the form lists them in.
"""

# isort: skip_file
# ruff: noqa: F401 - imported for their registrations

from workers.engine.models import logistic, mlp, cnn, vgg, lm
from workers.engine.data import digits, synthetic, images, emnist, cifar10, tokens, npz
from workers.engine.strategies import fedavg, fedavgm, fedadam, fedyogi, fedadagrad
from workers.engine import codec_components
from workers.engine.algorithms import fedavg as fedavg_client, fedprox as fedprox_client, scaffold, feddyn, ditto
from workers.engine.strategies import robust  # median, trimmed_mean, krum
