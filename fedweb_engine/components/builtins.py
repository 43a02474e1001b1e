"""The built-in components: importing this module registers them (``registry.ensure_builtins``).

They register exactly as a plugin does, with the decorators of :mod:`fedweb_engine.components.registry`,
each in (or beside) its own module; the order of the imports is the order the form lists them in.
"""

# isort: skip_file
# ruff: noqa: F401 - imported for their registrations

from fedweb_engine.models import logistic, mlp, cnn, vgg, lm
from fedweb_engine.data import digits, synthetic, images, emnist, cifar10, tokens, npz
from fedweb_engine.strategies import fedavg, fedavgm, fedprox, fedadam, fedyogi, fedadagrad
from fedweb_engine.communication import codec_options as codec_components
from fedweb_engine.algorithms import fedavg as fedavg_client, fedprox as fedprox_client, scaffold, feddyn, ditto
from fedweb_engine.strategies import robust  # median, trimmed_mean, krum
