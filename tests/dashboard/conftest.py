from __future__ import annotations

import pytest

from orchestrator.models import Experiment, RoundMetric
from tests.conftest import TINY_SPEC


def round_result(n: int, **overrides) -> dict:
    """A plausible RoundResult for round ``n`` (CPU: no VRAM)."""
    result = {
        "round": n, "participants": 4, "completed": 4, "stragglers": 0, "dropped": 0,
        "train_loss": 2.0 / n, "test_loss": 2.1 / n, "test_accuracy": min(0.99, 0.1 * n),
        "bytes_down": 4 * 1000, "bytes_up": 4 * 1000, "bytes_formula": 8 * 4 * 1000,
        "round_seconds": 0.5, "train_seconds": 0.4, "samples": 100, "rss_mb": 500.0, "threads": 4,
        "vram_allocated_mb": None, "vram_reserved_mb": None, "vram_peak_mb": None, "device": "cpu",
    }  # fmt: skip
    result.update(overrides)
    return result


def make_experiment(owner, *, rounds: int = 0, name: str = "tiny", spec: dict | None = None, **fields) -> Experiment:
    experiment = Experiment.objects.create(owner=owner, name=name, spec=spec or TINY_SPEC, **fields)
    for n in range(1, rounds + 1):
        RoundMetric.record(experiment, round_result(n))
    if rounds:
        Experiment.objects.filter(pk=experiment.pk).update(current_round=rounds)
        experiment.refresh_from_db()
    return experiment


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client
