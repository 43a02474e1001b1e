"""The Celery app. Every setting lives in Django settings under the CELERY_ namespace."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedweb.settings")
# CUDA numbers GPUs fastest-first by default, NVML (heartbeats, metrics) in PCI order: one order.
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
# torch.cuda.is_available() then asks NVML, without initialising the CUDA driver in this process,
# which forks the pool (a driver initialised before fork is unusable in the children).
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

app = Celery("fedweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Tasks live in workers/tasks.py, which is not a Django app; name it explicitly.
app.autodiscover_tasks(["workers"])

# Imported for its signal handlers: heartbeats start when a worker is ready.
import workers.heartbeat  # noqa: E402,F401
import workers.metrics  # noqa: E402,F401  (FEDWEB_WORKER_METRICS_PORT)
from workers.engine.plugins import load_plugins  # noqa: E402

# User code named in FEDWEB_PLUGINS, imported once here so the prefork pool's children inherit it;
# a module that fails to import stops the worker at start-up, naming the module. This process
# forks the pool, so it must never initialise CUDA: a plugin that does so at import is refused.
load_plugins(forbid_cuda=True)
