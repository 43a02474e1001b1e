"""The one check a new spec passes before anything is stored: the server's capacity limits and
the confinement of ``data.path``. The form, the API and ``Experiment.save`` (for new rows) all
call :func:`check_new_spec`; experiments stored earlier are never re-judged.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from django.conf import settings

from fedweb_engine.data.paths import confine
from fedweb_engine.spec.schema import Spec
from fedweb_engine.training.capacity import Estimate, Limits, check_capacity
from orchestrator.fleet.workers import pick_queue, queue_name


def datasets_root() -> Path:
    """The only folder a spec's ``data.path`` may lead into, on the web server and the workers."""
    return Path(settings.FEDWEB_DATA_DIR) / "datasets"


def server_limits() -> Limits:
    return Limits(
        max_params=settings.FEDWEB_MAX_PARAMS,
        max_round_memory_bytes_cpu=settings.FEDWEB_MAX_ROUND_MEMORY_CPU,
        max_round_memory_bytes_gpu=settings.FEDWEB_MAX_ROUND_MEMORY_GPU,
        max_rounds=settings.FEDWEB_MAX_ROUNDS,
        max_clients=settings.FEDWEB_MAX_CLIENTS,
        max_dataset_bytes=settings.FEDWEB_MAX_DATASET,
    )


def device_kind(spec: Spec) -> str:
    """ "gpu" or "cpu": where the spec's rounds will run, as the queue choice decides it."""
    device = spec.compute.device
    if device.startswith("cuda"):
        return "gpu"
    if device == "cpu" or queue_name("gpu") == queue_name("cpu"):
        return "cpu"
    return "gpu" if pick_queue(spec) == queue_name("gpu") else "cpu"  # auto: a GPU worker is live


def check_new_spec(spec: Spec) -> Estimate:
    """The spec's estimate, or ``SpecError`` naming the field over a limit or the bad path."""
    options = spec.data.options
    for f in dataclasses.fields(options):  # every path option of the dataset, confined like the loader's
        value = getattr(options, f.name)
        if f.metadata.get("path") and value is not None:
            confine(value, datasets_root(), f"data.options.{f.name}")
    return check_capacity(spec, server_limits(), device_kind(spec))
