"""``compute.isolation = "process"`` on a real Celery worker (prefork pool, daemonic children)."""

import numpy as np
import pytest
import torch

from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec
from orchestrator.models import Experiment, Status
from tests.conftest import TINY_SPEC
from tests.live import start_worker, wait_for

pytestmark = [pytest.mark.integration]

ISOLATED = {**TINY_SPEC, "rounds": 3, "compute": {"device": "cpu", "isolation": "process"}}
LEAKY_PLUGIN = {"FEDWEB_PLUGINS": "benchmarks.leaky_plugin"}  # keeps 50 MB per training call
LEAK_ROUNDS = 6


def _run_to_the_end(user, name: str, spec: dict) -> Experiment:
    e = Experiment.objects.create(owner=user, name=name, spec=spec)
    assert e.start()

    def finished():
        e.refresh_from_db()
        return e.status in (Status.COMPLETED, Status.FAILED)

    wait_for(finished, 180, f"experiment {name} to finish", interval=0.1)
    assert e.status == Status.COMPLETED, e.error
    return e


def _in_process(spec: dict) -> list:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the worker (OMP_NUM_THREADS=1): the same arithmetic order
    try:
        spec = {**spec, "compute": {**spec["compute"], "isolation": "none"}}
        return Simulation(Spec.from_dict(spec)).run()
    finally:
        torch.set_num_threads(threads)


def test_it_runs_isolated_rounds_on_a_worker_with_the_in_process_result(user, workers):
    workers.start("w1")

    e = _run_to_the_end(user, "isolated", ISOLATED)

    rows = list(e.rounds.order_by("round").values_list("round", "train_loss", "test_loss", "test_accuracy"))
    expected = [(r.round, r.train_loss, r.test_loss, r.test_accuracy) for r in _in_process(ISOLATED)]
    assert rows == expected


def _rss_slope(e: Experiment) -> tuple[list[float], float]:
    """Worker RSS per round and its least-squares slope in MB/round, from round 2 (after warm-up)."""
    rss = list(e.rounds.order_by("round").values_list("rss_mb", flat=True))
    return rss, float(np.polyfit(np.arange(2, len(rss) + 1), rss[1:], 1)[0])


@pytest.mark.slow
def test_it_keeps_the_worker_flat_when_an_isolated_model_leaks(user, workers):
    workers.start("w1", env=LEAKY_PLUGIN)
    spec = {**ISOLATED, "rounds": LEAK_ROUNDS}

    isolated = _run_to_the_end(user, "leak isolated", spec)
    inline = _run_to_the_end(user, "leak in-process", {**spec, "compute": {"device": "cpu"}})

    (rss_on, slope_on), (rss_off, slope_off) = _rss_slope(isolated), _rss_slope(inline)
    print(f"\nworker RSS per round with a model leaking 50 MB per round ({LEAK_ROUNDS} rounds, MB):")
    print(f"  isolation process: {' '.join(f'{v:.0f}' for v in rss_on)}  slope {slope_on:+.1f} MB/round")
    print(f"  isolation none:    {' '.join(f'{v:.0f}' for v in rss_off)}  slope {slope_off:+.1f} MB/round")
    assert slope_on < 5
    assert slope_off > 30


def test_it_stops_a_worker_whose_plugin_fails_to_import(live_env, tmp_path):
    worker = start_worker({**live_env, "FEDWEB_PLUGINS": "no_such_fedweb_plugin"}, tmp_path, "broken")
    try:
        wait_for(lambda: not worker.alive(), 60, "the worker to stop")
    finally:
        worker.stop()

    assert worker.proc.returncode != 0
    assert "FEDWEB_PLUGINS: module 'no_such_fedweb_plugin' failed to import" in worker.output()
