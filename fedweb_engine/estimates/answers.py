"""The answers the estimates helper gives (torch work): run in the helper process, or in a process
that has torch already. Each takes and returns plain, picklable values."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fedweb_engine.communication.codecs import make_codec
from fedweb_engine.data import partition_summary as _partition_summary
from fedweb_engine.data.paths import confine
from fedweb_engine.data.shapes import describe
from fedweb_engine.estimates.server_limits import Estimate, Limits
from fedweb_engine.spec.schema import DataSpec, Spec
from fedweb_engine.training.capacity import check_capacity, model_layout


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
    """The model's parameters and one client's encoded payloads, down and up, with the spec's codecs."""
    layout = list(model_layout(spec))
    c = spec.communication
    down = make_codec(c.downlink.name, layout, c.downlink.options).payload_bytes()
    up = make_codec(c.uplink.name, layout, c.uplink.options).payload_bytes()
    return {"params": sum(layout), "down": down, "up": up}


def train_samples(data: DataSpec) -> int:
    """The dataset's training rows, as its ``describe`` tells them (nothing loaded when it has one)."""
    return describe(data).train_samples


def partition_summary(data: DataSpec, seed: int, max_clients: int) -> dict:
    """Samples and label counts of the first ``max_clients`` clients (the dataset is built)."""
    return _partition_summary(data, seed, max_clients)
