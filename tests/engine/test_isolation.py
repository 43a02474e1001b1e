"""Process isolation (``compute.isolation = "process"``) and the FEDWEB_PLUGINS loader."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import weakref
from pathlib import Path

import psutil
import pytest
import torch

from fedweb_engine.components.plugins import PluginError, load_plugins
from fedweb_engine.isolation import child as isolation_child
from fedweb_engine.isolation import parent as isolation
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec
from tests.live import wait_for

ROOT = Path(__file__).resolve().parents[2]

SPEC = {
    "seed": 3,
    "rounds": 1,
    "data": {"dataset": "digits", "num_clients": 20, "image_size": 8},
    "model": {"name": "mlp", "hidden": 32},
    "participation": {"clients_per_round": 4},
    "local": {"momentum": 0.9},
    # top-k with error feedback: the child must write the residuals back, not only the sums
    "communication": {"uplink": "topk", "topk_ratio": 0.1},
    "compute": {"device": "cpu"},
}
ISOLATED = {**SPEC, "compute": {"device": "cpu", "isolation": "process"}}


def _run_isolated(queue) -> None:
    sim = Simulation(Spec.from_dict(ISOLATED))
    losses = [r.train_loss for r in sim.run()]
    # As NumPy arrays: a tensor would travel as a shared-memory handle that dies with this process.
    queue.put((losses, sim.global_flat.numpy().copy(), sim.residuals.numpy().copy()))


def test_it_trains_in_a_child_of_a_daemonic_process_with_the_same_result():
    # A Celery prefork worker runs tasks in daemonic processes, which multiprocessing forbids to
    # have children: this is that situation without Celery.
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    daemonic = ctx.Process(target=_run_isolated, args=(queue,), daemon=True)
    daemonic.start()
    losses, global_flat, residuals = queue.get(timeout=120)
    daemonic.join(30)
    inline = Simulation(Spec.from_dict(SPEC))

    expected = [r.train_loss for r in inline.run()]

    assert daemonic.exitcode == 0
    assert losses == expected
    assert torch.equal(torch.from_numpy(global_flat), inline.global_flat)
    assert torch.equal(torch.from_numpy(residuals), inline.residuals)


def test_it_reports_the_childs_own_peak_memory_with_what_user_code_leaked_there(monkeypatch):
    # Not ru_maxrss, which Linux carries over from the parent: the child's peak must show the
    # 50 MB a leaking model kept during the round, while the parent's RSS does not grow.
    peaks, parent_rss = [], []
    for plugins in ("", "benchmarks.leaky_plugin"):
        monkeypatch.setenv("FEDWEB_PLUGINS", plugins)
        sim = Simulation(Spec.from_dict(ISOLATED))
        parent_rss.append(sim.next_round().rss_mb)
        peaks.append(sim.child_peak_rss_mb)

    assert peaks[1] - peaks[0] >= 45
    assert parent_rss[1] - parent_rss[0] < 20


@pytest.fixture
def faulty(monkeypatch):
    """Make the isolated child's training fail: ``faulty("exit")``, ``faulty("oom")``, ``faulty("hang")``."""

    def use(fault: str) -> None:
        monkeypatch.setenv("FEDWEB_PLUGINS", "tests.engine.trainer_faults")
        monkeypatch.setenv("FEDWEB_TEST_FAULT", fault)

    return use


def test_it_reports_a_child_that_dies_as_an_error(faulty):
    faulty("exit")
    sim = Simulation(Spec.from_dict(ISOLATED))

    with pytest.raises(RuntimeError, match="isolated process: the child process exited with code 3 before reporting"):
        sim.next_round()


def test_it_raises_out_of_memory_in_the_child_as_out_of_memory(faulty):
    # The worker retries a round with a smaller client group on torch.OutOfMemoryError.
    faulty("oom")
    sim = Simulation(Spec.from_dict(ISOLATED))

    with pytest.raises(torch.OutOfMemoryError, match="CUDA out of memory"):
        sim.next_round()


def test_it_leaves_no_orphan_when_the_parent_is_killed(faulty):
    faulty("hang")
    code = (
        "import json, sys\n"
        "from fedweb_engine.simulation.runner import Simulation\n"
        "from fedweb_engine.spec.schema import Spec\n"
        "Simulation(Spec.from_dict(json.loads(sys.argv[1]))).next_round()\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code, json.dumps(ISOLATED)], cwd=ROOT)
    try:
        child = wait_for(lambda: _isolated_child_of(parent.pid), 60, "the isolated child")
        wait_for(lambda: _has_started_training(child), 60, "the child to read its job")
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)

    wait_for(lambda: not _running(child), 5, f"the orphaned child {child.pid} to exit")


def _isolated_child_of(pid: int) -> psutil.Process | None:
    for child in psutil.Process(pid).children():
        if "fedweb_engine.isolation.child" in child.cmdline():
            return child
    return None


def _has_started_training(child: psutil.Process) -> bool:
    # The watchdog thread starts once the job is read: the child is then inside training.
    return child.num_threads() > 1 and child.cpu_times().user > 0.5


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_it_refuses_to_isolate_when_shared_memory_is_too_small(monkeypatch):
    # What a container with Docker's default 64 MB /dev/shm meets with a larger dataset.
    monkeypatch.setattr(isolation, "shm_free_bytes", lambda: 1024)
    sim = Simulation(Spec.from_dict(ISOLATED))

    with pytest.raises(RuntimeError, match=r"needs \d+ MB more shared memory but /dev/shm has 0 MB free"):
        sim.next_round()


def test_it_imports_the_modules_named_in_fedweb_plugins():
    modules = load_plugins({"FEDWEB_PLUGINS": " colorsys, ,json "})

    assert [m.__name__ for m in modules] == ["colorsys", "json"]


def test_it_names_the_plugin_that_fails_to_import():
    with pytest.raises(PluginError, match="FEDWEB_PLUGINS: module 'no_such_fedweb_plugin' failed to import"):
        load_plugins({"FEDWEB_PLUGINS": "json,no_such_fedweb_plugin"})


def test_it_stops_the_engine_command_line_on_a_plugin_that_fails_to_import():
    env = {**os.environ, "FEDWEB_PLUGINS": "no_such_fedweb_plugin"}

    out = subprocess.run(
        [sys.executable, "-m", "fedweb_engine", "presets"], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert out.returncode == 2
    assert "module 'no_such_fedweb_plugin' failed to import" in out.stderr


def _shm_entries() -> set[str]:
    return set(os.listdir(isolation.SHM_DIR)) if os.path.isdir(isolation.SHM_DIR) else set()


def test_a_child_that_raises_leaves_no_shared_storage_behind(faulty):
    faulty("oom")
    sim = Simulation(Spec.from_dict(ISOLATED))
    before = _shm_entries()

    for _ in range(2):
        with pytest.raises(torch.OutOfMemoryError):
            sim.next_round()

    assert _shm_entries() == before  # nothing named in /dev/shm, before or after an error


@pytest.mark.parametrize("fails", [False, True])
def test_the_child_releases_its_job_on_both_paths_before_it_answers(monkeypatch, fails):
    # What the child received: with CUDA these are IPC handles the parent waits on until released.
    seen = []

    def read_job():
        received = torch.zeros(1 << 16)
        seen.append(weakref.ref(received))
        return {"tensor": received}

    def train(job):
        held = job["tensor"]  # noqa: F841  (in the frame a raised exception keeps alive)
        if fails:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return {"loss": 0.0}

    monkeypatch.setattr(isolation_child, "_train", train)
    monkeypatch.setattr(isolation_child, "_exit_at_end_of_stdin", lambda: None)
    monkeypatch.setattr(isolation_child, "load_plugins", lambda: [])

    outcome = isolation_child.answer(read_job)

    assert ("error" in outcome) == fails and outcome.get("out_of_memory", False) == fails
    assert len(seen) == 1 and seen[0]() is None
