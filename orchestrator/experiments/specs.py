"""Spec handling shared by the pages, the API and sweeps."""

from __future__ import annotations


def flatten(d: dict, prefix: str = "") -> dict:
    """``{"data": {"alpha": 0.5}}`` as ``{"data.alpha": 0.5}``."""
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
