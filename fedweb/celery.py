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
# Tasks live in workers/tasks.py, which is not a Django app; name it explicitly. Both are imported
# by the worker only, at its start (after Django is set up, before the pool forks): this module
# imports no project code, and the web process sends tasks by name (orchestrator.fleet).
app.autodiscover_tasks(["workers"])
# The worker's own set-up: heartbeats and its metrics endpoint (signal handlers), and the plugins.
app.conf.imports = ("workers.startup",)
