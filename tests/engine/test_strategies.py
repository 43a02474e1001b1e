"""Server strategies: one or two steps of each optimizer computed by hand, and exact resumes."""

import math

import pytest
import torch

from fedweb_engine.spec.schema import AlgorithmSpec, Spec
from fedweb_engine.spec.validation import build
from fedweb_engine.strategies import (
    FedAdagrad,
    FedAdam,
    FedAvg,
    FedAvgM,
    FedYogi,
    build_strategy,
)

STEP1 = torch.tensor([2.0, 0.0])
STEP2 = torch.tensor([0.0, 2.0])
ADAPTIVE = {"num_params": 2, "device": "cpu", "lr": 1.0, "beta1": 0.5, "beta2": 0.5, "tau": 1.0}


def _run(strategy, *updates) -> torch.Tensor:
    w = torch.zeros(2)
    for update in updates:
        strategy.step(w, update)
    return w


def test_it_steps_fedavg_by_the_server_lr():
    w = torch.tensor([1.0, 1.0])

    FedAvg(num_params=2, device="cpu", lr=0.5).step(w, torch.tensor([4.0, -1.0]))

    # [1, 1] + 0.5·[4, −1] = [3, 0.5]
    assert w.tolist() == [3.0, 0.5]


def test_it_accumulates_fedavgm_momentum():
    strategy = FedAvgM(num_params=2, device="cpu", lr=1.0, momentum=0.5)

    w = _run(strategy, STEP1, STEP2)

    # m1 = [2, 0], w1 = [2, 0]; m2 = 0.5·[2, 0] + [0, 2] = [1, 2], w2 = [3, 2]
    assert strategy.m.tolist() == [1.0, 2.0]
    assert w.tolist() == [3.0, 2.0]


def test_it_steps_fedadam_as_in_reddi_et_al():
    strategy = FedAdam(**ADAPTIVE)

    w1 = _run(strategy, STEP1).clone()
    w2 = w1 + 0
    strategy.step(w2, STEP2)

    # v0 = τ² = 1. Step 1: m = [1, 0]; v = 0.5·1 + 0.5·[4, 0] = [2.5, 0.5]; w = [1/(√2.5 + 1), 0]
    assert w1.tolist() == pytest.approx([1 / (math.sqrt(2.5) + 1), 0.0])
    # Step 2: m = [0.5, 1]; v = 0.5·[2.5, 0.5] + 0.5·[0, 4] = [1.25, 2.25]; w += [0.5/(√1.25 + 1), 1/2.5]
    assert strategy.v.tolist() == pytest.approx([1.25, 2.25])
    assert w2.tolist() == pytest.approx([w1[0].item() + 0.5 / (math.sqrt(1.25) + 1), 0.4])


def test_it_steps_fedyogi_as_in_reddi_et_al():
    strategy = FedYogi(**ADAPTIVE)

    w = _run(strategy, STEP1, STEP2)

    # Step 1: Δ² = [4, 0], sign(v − Δ²) = sign([−3, 1]) = [−1, 1], v = 1 − 0.5·Δ²·sign = [3, 1];
    #         m = [1, 0], w = [1/(√3 + 1), 0].
    # Step 2: Δ² = [0, 4], sign([3, −3]) = [1, −1], v = [3, 3]; m = [0.5, 1];
    #         w += [0.5/(√3 + 1), 1/(√3 + 1)].
    assert strategy.v.tolist() == pytest.approx([3.0, 3.0])
    assert w.tolist() == pytest.approx([1.5 / (math.sqrt(3) + 1), 1 / (math.sqrt(3) + 1)])


def test_it_steps_fedadagrad_as_in_reddi_et_al():
    strategy = FedAdagrad(**ADAPTIVE)

    w = _run(strategy, STEP1, STEP2)

    # Step 1: v = 1 + [4, 0] = [5, 1], m = [1, 0], w = [1/(√5 + 1), 0].
    # Step 2: v = [5, 5], m = [0.5, 1], w += [0.5/(√5 + 1), 1/(√5 + 1)].
    assert strategy.v.tolist() == pytest.approx([5.0, 5.0])
    assert w.tolist() == pytest.approx([1.5 / (math.sqrt(5) + 1), 1 / (math.sqrt(5) + 1)])


@pytest.mark.parametrize("name", ["fedavg", "fedavgm", "fedadam", "fedyogi", "fedadagrad"])
def test_it_resumes_exactly_from_a_state_dict(name):
    # Prepare: two rounds on one strategy, then a fresh one loaded from its state.
    spec = AlgorithmSpec(name=name, server_lr=0.3)
    first = build_strategy(spec, 2, "cpu")
    w = _run(first, STEP1, STEP2)
    saved = {k: v.clone() for k, v in first.state_dict().items()}
    second = build_strategy(spec, 2, "cpu")

    # Execute
    second.load_state_dict(saved)
    w_first, w_second = w.clone(), w.clone()
    first.step(w_first, torch.tensor([1.0, -1.0]))
    second.step(w_second, torch.tensor([1.0, -1.0]))

    # Assert
    assert type(first).name == name
    assert torch.equal(w_first, w_second)
    for key, value in first.state_dict().items():
        assert torch.equal(value, second.state_dict()[key])


def test_it_keeps_state_in_preallocated_buffers():
    strategy = FedYogi(**ADAPTIVE)
    pointers = {k: v.data_ptr() for k, v in strategy.state_dict().items()}

    _run(strategy, STEP1, STEP2)

    assert sorted(pointers) == ["m", "v"]
    assert {k: v.data_ptr() for k, v in strategy.state_dict().items()} == pointers


def test_it_rejects_a_state_dict_of_another_strategy():
    adam = FedAdam(**ADAPTIVE)

    with pytest.raises(ValueError, match="expected"):
        adam.load_state_dict({"momentum": torch.zeros(2)})
    with pytest.raises(ValueError, match="shape"):
        adam.load_state_dict({"m": torch.zeros(3), "v": torch.zeros(3)})


def test_it_builds_each_strategy_with_the_spec_knobs():
    spec = build(
        AlgorithmSpec,
        {"name": "fedyogi", "server_lr": 0.1, "options": {"beta1": 0.8, "beta2": 0.95, "tau": 1e-2}},
        bounds=True,
    )

    strategy = build_strategy(spec, 5, torch.device("cpu"))

    assert isinstance(strategy, FedYogi)
    assert (strategy.lr, strategy.beta1, strategy.beta2, strategy.tau) == (0.1, 0.8, 0.95, 1e-2)
    assert strategy.v.tolist() == pytest.approx([1e-4] * 5)
    assert (
        build_strategy(
            Spec.from_dict({"algorithm": {"name": "fedavgm", "server_momentum": 0.7}}).algorithm, 5, "cpu"
        ).momentum
        == 0.7
    )
