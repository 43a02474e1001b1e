"""What the new-experiment page shows before anything runs: the bandwidth estimate and the
partition preview. Both come from the engine; both are cheap (models built on the meta device,
partitions of small datasets only) and cached.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

from django.core.cache import cache

from workers.engine.spec import DataSpec, ModelSpec, Spec, SpecError

PREVIEW_MAX_CLIENTS = 50
# Datasets read from files the web process may not have; their partition is not previewed.
FILE_DATASETS = ("emnist_h5", "femnist_leaf", "cifar10")
# Above this many generated samples the preview would take seconds of CPU on the web server.
PREVIEW_MAX_SAMPLES = 60_000


def input_shape_of(data: DataSpec) -> tuple[tuple[int, ...], int]:
    """(sample shape, classes) of a dataset, without loading it; mirrors the engine's loaders."""
    from workers.engine.data import images, synthetic, tokens

    if data.dataset == "digits":
        return (1, data.image_size, data.image_size), 10
    if data.dataset == "synthetic":
        return (synthetic.DIMENSION,), synthetic.NUM_CLASSES
    if data.dataset == "synthetic_images":
        return (1, images.SIDE, images.SIDE), data.num_classes
    if data.dataset == "tokens":
        return (data.seq_len,), tokens.VOCAB
    if data.dataset == "cifar10":
        return (3, 32, 32), 10
    return (1, 28, 28), 62 if data.dataset == "femnist_leaf" else 10


@lru_cache(maxsize=64)
def _layout(model_json: str, shape: tuple[int, ...], classes: int) -> tuple[int, ...]:
    import torch

    from workers.engine.models import MODELS

    model_spec = ModelSpec(**json.loads(model_json))
    with torch.device("meta"):  # shapes only: no memory, no random numbers
        model = MODELS[model_spec.name](model_spec, shape, classes)
    return tuple(p.numel() for p in model.parameters())


def model_layout(spec: Spec) -> tuple[int, ...]:
    shape, classes = input_shape_of(spec.data)
    return _layout(json.dumps(spec.to_dict()["model"], sort_keys=True), shape, classes)


def bandwidth_estimate(spec: Spec) -> dict:
    """Bytes on the wire for the whole run with the chosen codecs, beside the fp32 formula.

    The estimate assumes every sampled client reports (dropout and dropped stragglers only lower
    the uplink); ``formula`` is the design's 2 × 4 bytes × params × clients × rounds.
    """
    from workers.engine.codecs import make_codec

    layout = list(model_layout(spec))
    params = sum(layout)
    c = spec.communication
    down = make_codec(c.downlink, layout, c.topk_ratio).payload_bytes()
    up = make_codec(c.uplink, layout, c.topk_ratio).payload_bytes()
    clients = [spec.cohort_size(r) for r in range(1, spec.rounds + 1)]
    total_clients = sum(clients)
    return {
        "params": params,
        "model_mb": 4 * params / 1e6,
        "rounds": spec.rounds,
        "clients_per_round": total_clients / spec.rounds,
        "client_rounds": total_clients,
        "down_per_client": down,
        "up_per_client": up,
        "down_total": down * total_clients,
        "up_total": up * total_clients,
        "total": (down + up) * total_clients,
        "formula_total": 8 * params * total_clients,
        "uplink": c.uplink,
        "downlink": c.downlink,
    }


def partition_preview(spec: Spec) -> dict:
    """The engine's ``partition_summary`` of the first clients, cached by the data section."""
    data = spec.data
    if data.dataset in FILE_DATASETS:
        raise SpecError("data.dataset", f"{data.dataset} is read from files; its partition is not previewed")
    samples = data.num_clients * data.mean_samples if data.dataset in ("synthetic_images", "tokens") else 0
    if samples > PREVIEW_MAX_SAMPLES or (data.dataset == "synthetic" and data.num_clients > 2000):
        raise SpecError("data.num_clients", "is too large to preview here (the run itself is fine)")
    section = json.dumps({"data": spec.to_dict()["data"], "seed": spec.seed}, sort_keys=True)
    key = "partition-preview:" + hashlib.sha256(section.encode()).hexdigest()
    summary = cache.get(key)
    if summary is None:
        from workers.engine.data import partition_summary

        summary = partition_summary(data, spec.seed, PREVIEW_MAX_CLIENTS)
        cache.set(key, summary, 3600)
    return summary
