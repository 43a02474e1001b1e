"""``compute.compile``: the spec's modes (old booleans included), the windows a compiled step runs,
and ``auto``'s decision from the measured eager steps, the steps left and this machine's record."""

import time

import numpy as np
import pytest
import torch

from fedweb_engine.spec.schema import Spec, SpecError
from fedweb_engine.training import compile_policy, compiled
from fedweb_engine.training.compile_policy import AutoCompile, client_steps_left, decide, graphs_expected
from fedweb_engine.training.vectorise import split_window, step_windows


def test_it_defaults_to_auto_and_takes_on_and_off():
    assert Spec.from_dict({}).compute.compile == "auto"
    assert Spec.from_dict({"compute": {"compile": "on"}}).compute.compile == "on"
    assert Spec.from_dict({"compute": {"compile": "off"}}).compute.compile == "off"


@pytest.mark.parametrize("old, mode", [(True, "on"), (False, "off")])
def test_a_stored_spec_with_the_old_boolean_loads_as_on_or_off(old, mode):
    stored = {"rounds": 3, "compute": {"device": "cpu", "compile": old, "client_group_size": 16}}

    assert Spec.from_stored(stored).compute.compile == mode
    assert Spec.from_dict(stored).compute.compile == mode  # an old API client's body
    assert Spec.from_stored(stored).compute.client_group_size == 16


@pytest.mark.parametrize("value", ["fast", "", 1, None, {"$ne": "off"}, ["on"], "on; rm -rf /"])
def test_a_bad_mode_names_the_field_and_the_choices(value):
    with pytest.raises(SpecError) as e:
        Spec.from_dict({"compute": {"compile": value}})

    assert e.value.field == "compute.compile"


def test_the_rest_is_padded_below_the_biggest_power_of_two_when_it_fits():
    # 44 active slots [20, 64) of 64: 32 exact at the top, the other 12 padded to 16 below them.
    assert split_window(20, 64, 64) == [(16, 32), (32, 64)]


def test_the_rest_is_padded_above_when_nothing_is_below():
    # 44 active slots [0, 44) of 64: 32 at the bottom, the other 12 padded upwards into idle slots.
    assert split_window(0, 44, 64) == [(0, 32), (32, 48)]


@pytest.mark.parametrize("lo, hi, slots", [(0, 32, 64), (0, 56, 64), (0, 37, 38)])
def test_one_window_stays_when_pieces_would_not_save_rows_or_do_not_fit(lo, hi, slots):
    # a power of two already; a rest of 24 padded to 32 (as many rows as one window of 64); no room.
    assert split_window(lo, hi, slots) is None


def test_step_windows_cover_every_active_client_once_in_powers_of_two():
    rng = np.random.default_rng(0)
    steps = np.sort(rng.integers(1, 30, size=45))  # a group's clients, sorted by step count
    active = torch.from_numpy((np.arange(30)[None, :] < steps[:, None]).astype(np.float32))
    slots = 64
    active = torch.cat([active, torch.zeros(slots - 45, 30)])

    windows = step_windows(active, bucketed=True, pieces=True)

    for t in range(30):
        covered = np.zeros(slots, dtype=int)
        for step, lo, hi, full in windows:
            if step == t:
                assert hi - lo & (hi - lo - 1) == 0  # a power of two
                covered[lo:hi] += 1
                assert full == bool(active[lo:hi, t].all())
        assert covered.max() == 1  # no slot stepped twice
        assert (covered[active[:, t].numpy() > 0] == 1).all()
    single = step_windows(active, bucketed=True, pieces=False)
    assert sum(hi - lo for _, lo, hi, _ in windows) < sum(hi - lo for _, lo, hi, _ in single)


def test_it_counts_the_client_steps_the_remaining_rounds_take():
    spec = Spec.from_dict({"rounds": 3, "data": {"num_clients": 4}, "participation": {"schedule": [2, 3, 4]},
                           "local": {"epochs": 2, "batch_size": 20}})  # fmt: skip
    sizes = np.array([20, 40, 60, 40])  # 1, 2, 3, 2 batches: 2 × 2 = 4 steps a client on average

    assert client_steps_left(spec, sizes, rounds_done=0) == (2 + 3 + 4) * 4
    assert client_steps_left(spec, sizes, rounds_done=1) == (3 + 4) * 4
    assert client_steps_left(spec, sizes, rounds_done=3) == 0


@pytest.mark.parametrize("group, largest, graphs", [(64, 108, 7), (128, 120, 8), (64, 44, 7), (4, 4, 3), (8, 1, 1)])
def test_a_run_compiles_one_graph_per_power_of_two_up_to_its_largest_group(group, largest, graphs):
    spec = Spec.from_dict({"data": {"num_clients": 200}, "participation": {"clients_per_round": largest},
                           "compute": {"client_group_size": group}})  # fmt: skip
    assert graphs_expected(spec) == graphs


def test_it_compiles_when_the_time_saved_exceeds_building_the_missing_graphs():
    # 1 ms a client-step × 100,000 client-steps × 35% = 35 s saved, against 2 of 7 graphs to build at 10 s.
    decision = decide(seconds_per_client_step=1e-3, client_steps=100_000, graphs=7, cached=5, build_seconds=10.0)

    assert decision.compile
    assert decision.note == (
        "compute.compile auto: compiling the vectorised step: ~100,000 client-steps left × 1.000 ms eager "
        "(measured) × 35% saved ≈ 35.0 s > ~20.2 s for 7 graphs (5 in this machine's cache, 2 to build at ~10 s "
        "each, measured on this machine)"
    )


def test_graphs_in_the_machines_cache_cost_almost_nothing():
    decision = decide(seconds_per_client_step=2e-5, client_steps=100_000, graphs=7, cached=7, build_seconds=None)

    assert decision.compile  # 0.7 s saved > 7 loads
    assert decision.note.endswith("≈ 0.7 s > ~0.4 s for 7 graphs (all in this machine's cache)")


def test_a_short_run_without_cached_graphs_stays_eager_and_says_what_would_pay():
    decision = decide(seconds_per_client_step=2e-4, client_steps=100_000, graphs=7, cached=0, build_seconds=None)

    assert not decision.compile  # 7 s saved: less than building 7 graphs, more than loading them
    assert f"<= ~{7 * compile_policy.COLD_GRAPH_SECONDS:.1f} s for 7 graphs" in decision.note
    assert "a default: none built here yet" in decision.note
    assert decision.note.endswith("one run with compute.compile on builds them")


def test_a_machine_without_a_compiler_stays_eager_with_the_reason(monkeypatch):
    monkeypatch.setattr(compiled.shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    missing = compiled.compiler_missing(torch.device("cpu"))

    decision = decide(seconds_per_client_step=1.0, client_steps=1e9, graphs=7, cached=0, build_seconds=1.0,
                      missing=missing)  # fmt: skip

    assert not decision.compile
    assert "no C++ compiler is installed" in decision.note


def test_auto_times_groups_after_a_warm_up_then_decides_once(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled, "_configured", None)
    spec = Spec.from_dict({"rounds": 45, "compute": {"device": "cpu"}})
    auto = AutoCompile(spec, work_left=lambda: 1_000_000.0, device=torch.device("cpu"))

    assert auto.timed(time.perf_counter() - 100.0, 10, "step") is None  # the warm-up group: not counted
    decision = auto.timed(time.perf_counter() - 1.0, 1000, "step")  # 1 ms a client-step

    assert decision is not None and auto.decision is decision and auto.start() is None
    cost = graphs_expected(spec) * compile_policy.COLD_GRAPH_SECONDS
    assert decision.compile == (0.35 * 1e-3 * 1e6 > cost)
    assert "× 1.000 ms eager" in decision.note  # ~1 ms measured, not the warm-up's 10 s a client-step


def test_a_package_built_here_counts_as_cached_and_its_build_time_is_remembered(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(compiled, "_configured", None)
    compiled.package_path("step", 4).parent.mkdir(parents=True)
    compiled.package_path("step", 4).write_bytes(b"")
    compiled.record("step", 12.5)

    assert compiled.cached_windows("step", [1, 2, 4]) == [4]
    assert compiled.recorded("step") == 12.5
    assert compiled.recorded("another step") == 12.5  # this machine's last build: its speed
