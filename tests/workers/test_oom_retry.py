"""The out-of-memory retry (workers.oom) with an out-of-memory error raised *inside* client
training, as CUDA raises it: the failed round's trainers must be gone before the rebuild starts,
the rebuild starts at half the group size, and a second error halves again."""

import weakref

import pytest
import torch

from fedweb_engine.simulation import runner
from fedweb_engine.training.client import SequentialTrainer, VectorTrainer
from orchestrator.models import Experiment, Status
from tests.conftest import TINY_SPEC
from workers.rounds import run_inline

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh(empty_round_cache):
    yield


class InjectedOOM:
    """Makes client training raise torch.OutOfMemoryError ``times`` times in round ``at_round``,
    keeping (as a real failed step does) the trainer and a large buffer alive in its frame."""

    def __init__(self, monkeypatch, *, at_round: int, times: int):
        self.at_round, self.left = at_round, times
        self.failed: list[weakref.ref] = []  # the trainers of the failed attempts
        self.sizes: list[int] = []  # the group size of every trainer trained in that round
        self.alive_at_rebuild: list[bool] = []  # whether a failed trainer lived when a new one was built
        self.round = 0
        for cls in (VectorTrainer, SequentialTrainer):
            monkeypatch.setattr(cls, "train", self._wrap(cls.train))
        original_make = runner.build_trainer

        def build_trainer(*args, **kwargs):
            self.alive_at_rebuild.extend(ref() is not None for ref in self.failed)
            return original_make(*args, **kwargs)

        monkeypatch.setattr(runner, "build_trainer", build_trainer)
        original_round = runner.Simulation.next_round

        def next_round(sim):
            self.round = sim.round + 1
            return original_round(sim)

        monkeypatch.setattr(runner.Simulation, "next_round", next_round)

    def _wrap(self, train):
        def faulty(trainer, start, plan, data):
            if self.round == self.at_round:
                self.sizes.append(trainer.group_size)
                if self.left > 0:
                    self.left -= 1
                    self.failed.append(weakref.ref(trainer))
                    activations = torch.empty(1 << 20)  # noqa: F841  (what a failed step leaves in its frame)
                    raise torch.OutOfMemoryError("CUDA out of memory (injected)")
            return train(trainer, start, plan, data)

        return faulty


def _spec(**compute):
    return {**TINY_SPEC, "participation": {"clients_per_round": 8}, "compute": {"device": "cpu", **compute}}


def test_it_frees_the_failed_trainers_before_rebuilding_at_half_the_group_size_twice(user, monkeypatch):
    oom = InjectedOOM(monkeypatch, at_round=2, times=2)
    e = Experiment.objects.create(owner=user, name="oom", spec=_spec(client_group_size=8))
    e.start(enqueue=False)

    e = run_inline(e)

    assert e.status == Status.COMPLETED, e.error
    assert oom.sizes == [8, 4, 2, 2, 2, 2]  # failed at 8, then at 4, then 8 clients in groups of 2
    assert oom.alive_at_rebuild and not any(oom.alive_at_rebuild)
    assert all(ref() is None for ref in oom.failed)
    assert Experiment.objects.get(pk=e.pk).client_group_size == 2
    warnings = list(e.log_entries.filter(level="warning").values_list("message", flat=True))
    assert warnings == [
        "Out of GPU memory in round 2; retrying with client group size 4",
        "Out of GPU memory in round 2; retrying with client group size 2",
    ]


def test_it_fails_clearly_when_even_one_client_does_not_fit(user, monkeypatch):
    InjectedOOM(monkeypatch, at_round=1, times=100)
    e = Experiment.objects.create(owner=user, name="oom", spec=_spec(client_group_size=2))
    e.start(enqueue=False)

    e = run_inline(e)

    assert e.status == Status.FAILED
    assert e.error == "Out of GPU memory in round 1, even with client group size 1"


def test_a_rebuild_after_oom_is_built_at_the_reduced_size_not_the_full_one(user, monkeypatch):
    built = []
    original = runner.Simulation.__init__

    def init(sim, spec, **kwargs):
        original(sim, spec, **kwargs)
        built.append(sim.replicas[0].trainer.group_size)

    monkeypatch.setattr(runner.Simulation, "__init__", init)
    InjectedOOM(monkeypatch, at_round=1, times=1)
    e = Experiment.objects.create(owner=user, name="oom", spec=_spec(client_group_size=8))
    e.start(enqueue=False)

    run_inline(e)

    assert built == [8, 4]
