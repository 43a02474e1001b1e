"""Compiled vectorised steps for real (inductor, on the CPU): the same model as eager steps for each
client algorithm, a bounded number of compilations over the memory report's 45 rounds, eager
steps with a note for a model that cannot compile, and a second process that loads the graphs
from the machine's compile cache.

Compiling costs tens of seconds a graph on a 2-core CPU, so the runs here have one window size
(every client one batch an epoch: equal step counts) and share one cache folder.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.presets import VARYING_SCHEDULE, preset_spec
from fedweb_engine.spec.schema import Spec
from fedweb_engine.training import compiled
from tests.engine import uncompilable

ROOT = Path(__file__).resolve().parents[2]
# 12 clients of ~150 digits (8x8), batches of 200: every client takes one step an epoch.
ONE_SHAPE = {
    "rounds": 3,
    "data": {"dataset": "digits", "num_clients": 12, "image_size": 8, "partition": "iid"},
    "model": {"name": "logistic"},
    "participation": {"clients_per_round": 4},
    "local": {"epochs": 2, "batch_size": 200, "lr": 0.1},
    "compute": {"device": "cpu", "client_group_size": 4, "compile": "on"},
    "evaluation": {"every": 3},
}
CLIENT_ALGORITHMS = [
    {"name": "fedavg"},
    {"name": "fedprox", "options": {"mu": 0.1}},
    {"name": "scaffold"},
    {"name": "feddyn", "options": {"alpha": 0.01}},
]


@pytest.fixture(scope="module")
def cache_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("compile-cache")


@pytest.fixture
def compile_cache(cache_folder, monkeypatch):
    """This module's own compile cache: the suite's other runs neither see nor feed it."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache_folder))
    monkeypatch.setattr(compiled, "_configured", None)
    return cache_folder


@pytest.mark.slow
@pytest.mark.parametrize("client", CLIENT_ALGORITHMS, ids=lambda c: c["name"])
def test_compiled_steps_train_the_model_eager_steps_train(client, compile_cache, tmp_path):
    spec = Spec.from_dict(ONE_SHAPE).replace(algorithm={"client": client})
    runs = {}
    for mode in ("on", "off"):
        sim = Simulation(spec.replace(compute={"compile": mode}), client_state_dir=tmp_path / mode)
        runs[mode] = (sim, sim.run())

    (on, on_results), (off, off_results) = runs["on"], runs["off"]
    assert on.compile_info()["compiling"] and on.compile_info()["graphs"] == 1 and not on.compile_info()["failed"]
    assert off.compile_info()["graphs"] == 0
    assert (on.global_flat - off.global_flat).abs().max().item() <= 1e-5
    assert [r.train_loss for r in on_results] == pytest.approx([r.train_loss for r in off_results], rel=1e-5)
    assert not torch.equal(on.global_flat, Simulation(spec).global_flat)  # it trained


@pytest.mark.slow
def test_windows_that_start_inside_a_group_give_the_eager_model(compile_cache):
    # Clients of different sizes: windows shrink, start past slot 0 (unaligned row offsets) and
    # come in two pieces; momentum takes the flat step with its own buffer.
    spec = Spec.from_dict(ONE_SHAPE | {"rounds": 2}).replace(
        data={"partition": "dirichlet", "num_clients": 20}, participation={"clients_per_round": 7},
        local={"batch_size": 16, "epochs": 1, "momentum": 0.5}, compute={"client_group_size": 8},
    )  # fmt: skip
    on, off = Simulation(spec), Simulation(spec.replace(compute={"compile": "off"}))
    on.run(), off.run()

    assert on.compile_info()["graphs"] >= 3 and not on.compile_info()["failed"]
    assert (on.global_flat - off.global_flat).abs().max().item() <= 1e-5


@pytest.fixture
def uncompilable_model():
    yield uncompilable.register()
    uncompilable.unregister()


def test_a_model_that_cannot_compile_trains_eagerly_with_a_note(uncompilable_model, compile_cache):
    spec = Spec.from_dict(ONE_SHAPE).replace(model={"name": uncompilable_model, "options": {}})
    sim = Simulation(spec)
    eager = Simulation(spec.replace(compute={"compile": "off"}))

    results = sim.run()

    info = sim.compile_info()
    assert info["failed"].startswith("RuntimeError: There was no fake impl registered for ")
    assert not info["compiling"] and info["graphs"] == 0
    assert sim.notes[0] == "compute.compile on: compiling the vectorised step"
    assert sim.notes[1].startswith("compute.compile: the vectorised step could not be compiled, training eagerly: ")
    assert len(sim.notes) == 2  # said once, not once a step
    assert [r.completed for r in results] == [4, 4, 4]
    eager.run()
    assert (sim.global_flat - eager.global_flat).abs().max().item() <= 1e-6


@pytest.mark.slow
def test_compilations_stay_bounded_over_the_45_varying_rounds(monkeypatch, compile_cache):
    # The "fx" backend traces a graph per window size as the real one does, and runs it without
    # building packages: the count is the real one at a fraction of the cost.
    monkeypatch.setattr(compiled, "BACKEND", "fx")
    traced = []
    monkeypatch.setattr(compiled.CompiledSteps, "_compile", _counted(compiled.CompiledSteps._compile, traced))
    spec = preset_spec("varying-participants").replace(
        data={"mean_samples": 20}, evaluation={"every": 45}, compute={"device": "cpu", "compile": "on"}
    )
    sim = Simulation(spec)

    results = sim.run()

    assert [r.participants for r in results] == VARYING_SCHEDULE
    info, windows = sim.compile_info(), sim.cache_info()["cpu#0.vmapped_steps"]
    sizes = set(sim.replicas[0].trainer.compiler.steps.fns)
    assert info["graphs"] == windows == len(sizes) == len(traced) == len(set(traced))
    assert sizes <= {2**k for k in range(8)}  # powers of two up to the group size (128): at most 8
    assert info["seconds"] > 0 and not info["failed"]


@pytest.mark.slow
def test_a_second_process_on_the_same_shapes_loads_the_graphs_from_the_machines_cache(tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(ONE_SHAPE | {"rounds": 1}))
    env = {"FEDWEB_DATA_DIR": str(tmp_path / "data"), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}

    def compile_notes() -> list[str]:
        run = subprocess.run([sys.executable, "-m", "fedweb_engine", "run", str(spec), "--quiet"], cwd=ROOT,
                             env=env, capture_output=True, text=True, check=True)  # fmt: skip
        return [line for line in run.stderr.splitlines() if " for windows of " in line]

    first, second = compile_notes(), compile_notes()

    assert len(first) == len(second) == 1  # one window size: 4 clients
    assert first[0].startswith("note: compiled the vectorised step for windows of 4 clients in ")
    assert second[0].startswith("note: loaded the compiled step from this machine's cache for windows of 4 clients in ")
    seconds = [float(re.search(r"in ([\d.]+) s", note).group(1)) for note in (first[0], second[0])]
    assert seconds[1] < 1.0 < seconds[0]  # loading a package: no tracing, no compilation
    cache = tmp_path / "data" / "compile-cache"
    assert len(list((cache / compiled.PACKAGES).glob("*-4.pt2"))) == 1 and (cache / compiled.RECORD).is_file()


def _counted(compile_fn, traced: list):
    def counted(self, args, path):
        traced.append(args[0].shape[0])
        return compile_fn(self, args, path)

    return counted
