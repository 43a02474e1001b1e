"""The answers the estimates helper gives (torch work): run in the helper process, or in a process
that has torch already. Each takes and returns plain, picklable values."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fedweb_engine.algorithms import build_algorithm
from fedweb_engine.algorithms.base import extra_bytes
from fedweb_engine.communication.codecs import make_codec
from fedweb_engine.data import partition_summary as _partition_summary
from fedweb_engine.data.paths import confine
from fedweb_engine.data.shapes import describe
from fedweb_engine.estimates.capacity import check_capacity, model_layout
from fedweb_engine.estimates.server_limits import Estimate, Limits
from fedweb_engine.spec.schema import DataSpec, Spec


def check_new_spec(spec: Spec, limits: Limits, device_kind: str, datasets_root: str | Path) -> Estimate:
    """Every path option of the dataset confined to ``datasets_root`` (as the loader confines it),
    then the spec's estimate within ``limits``; else ``SpecError`` naming the field."""
    options = spec.data.options
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if f.metadata.get("path") and value is not None:
            confine(value, datasets_root, f"data.options.{f.name}")
    return check_capacity(spec, limits, device_kind)


def payload_sizes(spec: Spec) -> dict[str, int]:
    """The model's parameters and one client's payloads, down and up: the model's (or its update's),
    encoded with the spec's codecs, and what the client algorithm sends beside them (fp32 whatever the
    codecs, as rounds count it: SCAFFOLD's c down and Δc_i up)."""
    layout = list(model_layout(spec))
    c = spec.communication
    model_down = make_codec(c.downlink.name, layout, c.downlink.options).payload_bytes()
    model_up = make_codec(c.uplink.name, layout, c.uplink.options).payload_bytes()
    client = spec.algorithm.client
    algorithm = build_algorithm(client.name, client.options, num_params=sum(layout), device="meta", lr=spec.local.lr)
    extra_down, extra_up = extra_bytes(algorithm)
    return {
        "params": sum(layout), "down": model_down + extra_down, "up": model_up + extra_up,
        "model_down": model_down, "model_up": model_up, "extra_down": extra_down, "extra_up": extra_up,
    }  # fmt: skip


def train_samples(data: DataSpec) -> int:
    """The dataset's training rows, as its ``describe`` tells them (nothing loaded when it has one)."""
    return describe(data).train_samples


def partition_summary(data: DataSpec, seed: int, max_clients: int) -> dict:
    """Samples and label counts of the first ``max_clients`` clients (the dataset is built)."""
    return _partition_summary(data, seed, max_clients)
