"""FedWeb's example plugin: importing it registers ``resnet_small``, ``stripes``, ``fedavg_clipped``
and the client algorithm ``clipped_steps``.

FedWeb imports this package at start-up, found through the ``fedweb.plugins`` entry point of
``pyproject.toml`` (``pip install``) or through ``FEDWEB_PLUGINS=fedweb_plugin_example``.
"""

from fedweb_plugin_example import algorithms, datasets, models, strategies  # noqa: F401  (they register on import)

__version__ = "0.1.0"
