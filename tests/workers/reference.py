"""An experiment run alone, as the workers run it: what every live test's recorded rounds (and
final checkpoint) must equal."""

from pathlib import Path

import torch

from fedweb_engine.simulation.runner import Simulation
from orchestrator.models import Experiment

# The RoundResult fields that depend only on the run's arithmetic (not on time, memory or the host).
COMPARED = ("participants", "completed", "samples", "bytes_up", "bytes_down", "train_loss", "test_loss",
            "test_accuracy")  # fmt: skip


def reference_simulation(spec: dict) -> tuple[Simulation, list[dict]]:
    """The run alone, in this process, with one thread as in the workers (OMP_NUM_THREADS=1): the
    same arithmetic order, so its rounds equal the workers' exactly. Returns the simulation after
    its last round (close it) and the rounds' results."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        sim = Simulation(Experiment(spec=spec).parsed_spec())
        results = [sim.next_round().to_dict() for _ in range(spec["rounds"])]
    finally:
        torch.set_num_threads(threads)
    return sim, results


def compared(results: list[dict]) -> list[tuple]:
    """The COMPARED fields of each round's result."""
    return [tuple(r[k] for k in COMPARED) for r in results]


def reference_rounds(spec: dict) -> list[tuple]:
    sim, results = reference_simulation(spec)
    sim.close()
    return compared(results)


def recorded_rounds(experiment: Experiment) -> list[tuple]:
    """The rounds the workers recorded, in the same shape."""
    return list(experiment.rounds.order_by("round").values_list(*COMPARED))


def assert_final_checkpoint_equals(experiment: Experiment, reference: Simulation, folder: Path, atol=1e-5) -> None:
    """The experiment's last checkpoint holds the reference's global model, its client algorithm's
    server buffers and every client's state rows (copied beside the checkpoint), within ``atol``."""
    checkpoint = experiment.latest_checkpoint()
    assert checkpoint is not None and checkpoint.round == reference.round, (checkpoint, reference.round)
    saved = Simulation.from_checkpoint(checkpoint.path, client_state_dir=folder)
    try:
        torch.testing.assert_close(saved.global_flat, reference.global_flat, atol=atol, rtol=0)
        assert (saved.client is None) == (reference.client is None)
        for name, value in (reference.client.server if reference.client else {}).items():
            torch.testing.assert_close(saved.client.server[name], value, atol=atol, rtol=0, msg=f"server {name}")
        everyone = torch.arange(len(reference.sizes))
        for name, store in (reference.client.stores if reference.client else {}).items():
            rows = saved.client.stores[name].gather(everyone, saved.device)
            expected = store.gather(everyone, reference.device)
            assert float(expected.abs().sum()) > 0, f"{name}: the reference's rows are all zero"
            torch.testing.assert_close(rows, expected, atol=atol, rtol=0, msg=f"client state {name}")
    finally:
        saved.close()
