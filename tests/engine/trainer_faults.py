"""Test plugin (``FEDWEB_PLUGINS=tests.engine.trainer_faults``): client training that fails.

``FEDWEB_TEST_FAULT`` picks how: ``exit`` (the process dies with code 3), ``oom`` (a CUDA
out-of-memory error) or ``hang`` (training never returns). Loaded only by the isolated child in
these tests, so the test process itself trains normally.
"""

import os
import time

import torch

from fedweb_engine.training.client import SequentialTrainer, VectorTrainer


def _faulty(*args, **kwargs):
    fault = os.environ.get("FEDWEB_TEST_FAULT")
    if fault == "exit":
        os._exit(3)
    if fault == "oom":
        raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
    if fault == "hang":
        time.sleep(600)
    raise AssertionError(f"unknown FEDWEB_TEST_FAULT {fault!r}")


VectorTrainer.train = SequentialTrainer.train = _faulty
