"""The privacy cost of a DP-FedAvg run, accounted with Google's ``dp-accounting`` library (RDP).

The engine applies the mechanism (``fedweb_engine/privacy/mechanism.py``); ε is computed here, when a
round is recorded, and by the New experiment form for the whole run before launch. Each round
is one Gaussian mechanism with noise multiplier z, applied to a cohort sampled with rate
q = cohort / num_clients. The cohort is a fixed-size sample without replacement; accounting it as
Poisson sampling with the same rate is the standard approximation of DP-FedAvg (McMahan et al.
2018), and it is the event the library accounts.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

import dp_accounting
from dp_accounting.rdp import rdp_privacy_accountant

from fedweb_engine.spec.schema import Spec


@lru_cache(maxsize=256)
def _epsilon(noise_multiplier: float, rounds_by_rate: tuple[tuple[float, int], ...], delta: float) -> float:
    if noise_multiplier <= 0:
        return float("inf")  # no noise: no privacy
    events = [
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(noise_multiplier)), count
        )
        for rate, count in rounds_by_rate
    ]
    accountant = rdp_privacy_accountant.RdpAccountant()
    accountant.compose(dp_accounting.ComposedDpEvent(events))
    return float(accountant.get_epsilon(delta))


def epsilon(noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    """ε at ``delta`` after ``steps`` Poisson-sampled Gaussian mechanisms (the library's RDP accountant)."""
    if steps <= 0:
        return 0.0
    return _epsilon(float(noise_multiplier), ((float(sampling_rate), int(steps)),), float(delta))


def spent_epsilon(spec: Spec, rounds: int) -> float | None:
    """ε at ``spec.privacy.delta`` after the first ``rounds`` rounds of ``spec``; None without DP.

    Rounds with the same cohort size (hence the same sampling rate) are composed together, so a
    1,000-round run costs one RDP computation per distinct cohort size.
    """
    if spec.privacy.mechanism != "gaussian":
        return None
    if rounds <= 0:
        return 0.0
    n = spec.data.num_clients
    rates = Counter(spec.cohort_size(r) / n for r in range(1, rounds + 1))
    return _epsilon(float(spec.privacy.noise_multiplier), tuple(sorted(rates.items())), float(spec.privacy.delta))


def projected_epsilon(spec: Spec) -> float | None:
    """ε the whole run will have spent (what the New experiment form shows before launch)."""
    return spent_epsilon(spec, spec.rounds)
