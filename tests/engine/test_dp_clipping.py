"""DP-FedAvg in the engine: clipping bounds every client's influence on the model."""

import numpy as np
import torch

from fedweb_engine.privacy.mechanism import GaussianMechanism, clip_rows_
from fedweb_engine.spec.schema import PrivacySpec


def test_it_moves_the_model_by_at_most_c_over_n_for_one_client_sending_a_huge_update():
    n, clip = 10, 1.0
    updates = torch.zeros(n, 50)
    updates[3] = 1e6  # one client sends a huge update, the others none
    clip_rows_(updates, clip)
    mech = GaussianMechanism(PrivacySpec(mechanism="gaussian", clip_norm=clip, noise_multiplier=0.0), 50, "cpu")
    avg = mech.privatise_(updates.sum(0), n, np.random.default_rng(0))
    assert float(avg.norm()) <= clip / n + 1e-6


def test_it_leaves_updates_within_the_norm_unchanged():
    updates = torch.full((2, 4), 0.1)
    norms = clip_rows_(updates, 5.0)
    assert torch.allclose(updates, torch.full((2, 4), 0.1)) and torch.all(norms < 5.0)


def test_it_adds_noise_of_z_times_c_over_the_cohort():
    mech = GaussianMechanism(PrivacySpec(mechanism="gaussian", clip_norm=2.0, noise_multiplier=1.5), 200_000, "cpu")
    avg = mech.privatise_(torch.zeros(200_000), 4, np.random.default_rng(0))
    assert abs(float(avg.std()) - 1.5 * 2.0 / 4) < 0.01


def test_it_shrinks_an_adaptive_clip_norm_when_no_update_reaches_it():
    spec = PrivacySpec(mechanism="gaussian", adaptive_clip=True, count_noise=1e-9, noise_multiplier=0.0)
    mech = GaussianMechanism(spec, 4, "cpu")
    mech.adapt(unclipped=10, reported=10, cohort=10, rng=np.random.default_rng(0))
    assert mech.clip_norm < 1.0
