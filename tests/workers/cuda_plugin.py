"""Test plugin (``FEDWEB_PLUGINS=tests.workers.cuda_plugin``) that touches CUDA when imported.

It always asks ``torch.cuda.is_available()``, which plugins commonly do at import; with
``FEDWEB_TEST_PLUGIN_CUDA=init`` it also initialises CUDA, which a worker's parent must refuse.
"""

import os

import torch

AVAILABLE = torch.cuda.is_available()
if os.environ.get("FEDWEB_TEST_PLUGIN_CUDA") == "init":
    torch.cuda.init()
