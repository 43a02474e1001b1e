"""What the new-experiment page shows before anything runs: the bandwidth and resource
estimates and the partition preview. All come from the engine's estimates (models built on the
meta device, partitions of small datasets only), asked without torch in this process
(``fedweb_engine.estimates.queries``), and cached.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

from django.core.cache import cache

from fedweb_engine.components import registry
from fedweb_engine.estimates import queries
from fedweb_engine.estimates.server_limits import LIMIT_SETTINGS
from fedweb_engine.spec.schema import Spec, SpecError
from orchestrator.experiments.limits import check_new_spec, server_limits

PREVIEW_MAX_CLIENTS = 50
# Above this many generated samples the preview would take seconds of CPU on the web server.
PREVIEW_MAX_SAMPLES = 60_000


def resource_estimate(spec: Spec) -> dict:
    """Parameters, memory per round and dataset size (the capacity check's own estimate), with
    this server's limits for the device the spec will run on."""
    est = check_new_spec(spec)
    limits = server_limits()
    return {
        **est.to_dict(),
        "limit_params": limits.max_params,
        "limit_round_bytes": getattr(limits, f"max_round_memory_bytes_{est.device_kind}"),
        "limit_dataset_bytes": limits.max_dataset_bytes,
        "limit_setting": LIMIT_SETTINGS[f"max_round_memory_bytes_{est.device_kind}"],
    }


def bandwidth_estimate(spec: Spec) -> dict:
    """Bytes on the wire for the whole run with the chosen codecs, beside the fp32 formula (the
    resources and the privacy spent are their own boxes: ``resource_estimate``, ``privacy_estimate``).

    The estimate assumes every sampled client reports (dropout and dropped stragglers only lower
    the uplink); ``formula`` is the design's 2 × 4 bytes × params × clients × rounds.
    """
    sizes = queries.payload_sizes(spec)
    params, down, up = sizes["params"], sizes["down"], sizes["up"]
    c = spec.communication
    model_down, model_up = sizes["model_down"], sizes["model_up"]
    extra_down, extra_up = sizes["extra_down"], sizes["extra_up"]
    client = spec.algorithm.client
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
        "model_down_per_client": model_down,
        "model_up_per_client": model_up,
        "extra_down_per_client": extra_down,
        "extra_up_per_client": extra_up,
        "client_algorithm": client.name,
        "down_total": down * total_clients,
        "up_total": up * total_clients,
        "total": (down + up) * total_clients,
        "formula_total": 8 * params * total_clients,
        "uplink": c.uplink.name,
        "downlink": c.downlink.name,
    }


def privacy_estimate(spec: Spec) -> dict | None:
    """ε at δ the whole run will have spent with DP-FedAvg (the accountant the workers use); None without DP."""
    if spec.privacy.mechanism == "none":
        return None
    from orchestrator.experiments.privacy_budget import (
        projected_epsilon,  # why: dp_accounting takes seconds to import; only DP specs need it
    )

    p, eps = spec.privacy, projected_epsilon(spec)
    # z = 0 spends ε = ∞, which JSON cannot carry: null, shown as ∞.
    return {"epsilon": eps if math.isfinite(eps) else None, "delta": p.delta, "noise_multiplier": p.noise_multiplier}


def partition_preview(spec: Spec) -> dict:
    """The engine's ``partition_summary`` of the first clients, cached by the data section; or
    ``{"previewed": False, "reason": ...}`` for a dataset this page does not preview (read from
    files, no ``describe``, too big): a state the page shows, not an error, since the spec is fine."""
    data = spec.data
    component = registry.get("dataset", data.name)
    if any(f.metadata.get("path") for f in dataclasses.fields(component.options)):
        return _not_previewed(f"{data.name} is read from files; its partition is not previewed")
    if component.traits.get("describe") is None:
        return _not_previewed(f"{data.name} does not describe its size (describe=); its partition is not previewed")
    if queries.train_samples(data) > PREVIEW_MAX_SAMPLES:
        return _not_previewed("this dataset is too large to preview here (the run itself is fine)")
    section = json.dumps({"data": spec.to_dict()["data"], "seed": spec.seed}, sort_keys=True)
    key = "partition-preview:" + hashlib.sha256(section.encode()).hexdigest()
    summary = cache.get(key)
    if summary is None:
        try:
            summary = queries.partition_summary(data, spec.seed, PREVIEW_MAX_CLIENTS)
        except SpecError:
            raise
        except Exception as e:  # a plugin loader's own failure is shown beside the dataset, not a 500
            raise SpecError("data.name", f"{data.name} could not be loaded: {type(e).__name__}: {e}") from None
        cache.set(key, summary, 3600)
    return {"previewed": True, **summary}


def _not_previewed(reason: str) -> dict:
    return {"previewed": False, "reason": reason}
