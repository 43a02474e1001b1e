"""One experiment sharded over two real Celery workers: the same model as the unsharded run, and a
shard worker killed with SIGKILL mid-round costs only its shard's redelivery."""

import pytest
import torch

from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.state.checkpoint import read_checkpoint
from orchestrator.models import Experiment, RoundShard, Status
from tests.conftest import TINY_SPEC
from tests.live import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SHARDED = {**TINY_SPEC, "data": {"dataset": "digits", "num_clients": 40, "image_size": 8},
           "participation": {"clients_per_round": 8}, "compute": {"device": "cpu", "client_group_size": 2, "shards": 2}}  # fmt: skip


def _reference(spec: dict) -> Simulation:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the workers (OMP_NUM_THREADS=1)
    try:
        sim = Simulation(Experiment(spec={**spec, "compute": {**spec["compute"], "shards": 1}}).parsed_spec())
        sim.run()
    finally:
        torch.set_num_threads(threads)
    return sim


def _finished(e, timeout=240):
    def check():
        e.refresh_from_db()
        return e.status in (Status.COMPLETED, Status.FAILED)

    wait_for(check, timeout, f"experiment {e.pk} to finish", interval=0.1)
    assert e.status == Status.COMPLETED, e.error


def test_it_ends_with_the_unsharded_weights_on_two_workers(user, workers):
    e = Experiment.objects.create(owner=user, name="sharded", spec=SHARDED)
    w1, w2 = workers.start_all("w1", "w2").values()
    e.start()
    _finished(e)
    assert list(e.rounds.order_by("round").values_list("round", flat=True)) == [1, 2, 3, 4, 5]
    reference = _reference(SHARDED)
    tensors, meta = read_checkpoint(e.latest_checkpoint().path)
    assert meta["round"] == 5
    assert torch.allclose(tensors["global"], reference.global_flat, atol=1e-5, rtol=0)
    assert "workers.tasks.run_shard" in w1.output() and "workers.tasks.run_shard" in w2.output()
    assert not RoundShard.objects.filter(experiment=e).exists()  # rows go once their round is recorded


def test_it_completes_every_round_once_when_a_shard_worker_is_killed(user, workers):
    spec = {**SHARDED, "rounds": 6, "local": {"epochs": 40}}  # shards of about a second
    e = Experiment.objects.create(owner=user, name="shard killed", spec=spec)
    w1 = workers.start_all("w1", "w2")["w1"]
    e.start()

    def w1_trains_a_shard():
        return RoundShard.objects.filter(experiment=e, done=False, worker__startswith="w1@").exists()

    wait_for(w1_trains_a_shard, 120, "w1 to hold a shard", interval=0.02)
    w1.kill9()
    _finished(e)
    assert list(e.rounds.order_by("round").values_list("round", flat=True)) == [1, 2, 3, 4, 5, 6]
    reference = _reference(spec)
    tensors, _ = read_checkpoint(e.latest_checkpoint().path)
    assert torch.allclose(tensors["global"], reference.global_flat, atol=1e-5, rtol=0)
    # The kill is noticed and said, whichever lease runs out first: w1's shard ("Shard k of round r was
    # held by w1@…") or, when w1 had also claimed the round itself, the round ("Round r was held by w1@…",
    # whose redelivery fans out again only the shards not done).
    warnings = list(e.log_entries.filter(level="warning").values_list("message", flat=True))
    assert any("was held by w1@" in m and "stopped answering" in m for m in warnings), warnings
