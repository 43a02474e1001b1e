"""Spec handling shared by the pages, the API and sweeps."""

from __future__ import annotations

from fedweb_engine.spec import legacy as spec_legacy


def shown_spec(experiment) -> dict:
    """The spec as the pages show it: a native run's in today's shape, as it ran (an old flat spec,
    or one naming the retired server-side fedprox, which ran FedAvg's server step:
    ``spec_legacy.upgrade``); an external run's config as its script sent it. Nothing is stored."""
    if getattr(experiment, "kind", "native") == "external" or not isinstance(experiment.spec, dict):
        return experiment.spec
    return spec_legacy.upgrade(experiment.spec)


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"data": {"alpha": 0.5}}`` as ``{"data.alpha": 0.5}``."""
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
