"""An experiment run alone, as the workers run it: what every live test's recorded rounds must equal."""

import torch

from orchestrator.models import Experiment
from workers.engine.runner import Simulation

# The RoundResult fields that depend only on the run's arithmetic (not on time, memory or the host).
COMPARED = ("participants", "completed", "samples", "bytes_up", "bytes_down", "train_loss", "test_loss",
            "test_accuracy")  # fmt: skip


def reference_rounds(spec: dict) -> list[tuple]:
    """The run alone, in this process, with one thread as in the workers (OMP_NUM_THREADS=1): the
    same arithmetic order, so its rounds equal the workers' exactly."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sim = Simulation(Experiment(spec=spec).parsed_spec())
        results = [sim.next_round().to_dict() for _ in range(spec["rounds"])]
    finally:
        torch.set_num_threads(threads)
    return [tuple(r[k] for k in COMPARED) for r in results]


def recorded_rounds(experiment: Experiment) -> list[tuple]:
    """The rounds the workers recorded, in the same shape."""
    return list(experiment.rounds.order_by("round").values_list(*COMPARED))
