"""Client algorithms (issue 19): each built-in's update rule checked by hand on a tiny model.

Two clients, two local steps each (the second step is where FedProx's and FedDyn's pull on
``w − w_start`` is non-zero), on a linear softmax classifier whose gradient is written out here
in NumPy. Both trainers (vectorised and sequential) must give the hand result within 1e-6, and
the vectorised one both ways it steps: per parameter, with the algorithm's ``correct_weights``
(plain SGD), and on the flat [n, P] gradient with ``correct`` (what momentum or fp16 take).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from fedweb_engine.algorithms import ClientAlgorithm, ClientRound, GroupContext, build_algorithm
from fedweb_engine.components import registry
from fedweb_engine.data.base import FederatedData
from fedweb_engine.spec.schema import LocalSpec
from fedweb_engine.training.client import SequentialTrainer, VectorTrainer
from fedweb_engine.training.plan import assemble_group
from tests.engine.state_store_standin import InMemoryStateStore

LR, N_CLIENTS = 0.3, 5
CPU = torch.device("cpu")
RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 3)).astype(np.float32)  # client 0: rows 0, 1; client 1: rows 2, 3
Y = np.array([0, 1, 1, 1])
CLIENTS = np.array([1, 3])  # population ids of the two clients


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(3, 2)


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()


def hand_grad(w: np.ndarray, rows: list[int]) -> np.ndarray:
    """∂/∂w of the mean cross-entropy of softmax(W x + b) over ``rows``; w = [W (2×3) row-major, b]."""
    W, b = w[:6].reshape(2, 3), w[6:]
    gW, gb = np.zeros((2, 3)), np.zeros(2)
    for r in rows:
        z = W @ X[r] + b
        p = np.exp(z - z.max())
        p /= p.sum()
        p[Y[r]] -= 1
        gW += np.outer(p, X[r])
        gb += p
    return np.concatenate([gW.ravel(), gb]) / len(rows)


def _data() -> FederatedData:
    x, y = torch.from_numpy(X), torch.from_numpy(Y)
    offsets = torch.tensor([0, 0, 2, 2, 4, 4])  # clients 1 and 3 hold two rows each
    return FederatedData(x, y, offsets, x, y, 2, (3,))


def _plan():
    # Batch size 1: each client takes a step on its first row, then one on its second.
    batches = [np.array([[0], [1]]), np.array([[0], [1]])]
    return assemble_group(CLIENTS, np.array([2, 2]), batches, _data().offsets.numpy(), batch_size=1, slots=2)


def _trainer(kind: str, algorithm, local: LocalSpec | None = None):
    cls = SequentialTrainer if kind == "sequential" else VectorTrainer
    trainer = cls(_model(), 2, local or LocalSpec(lr=LR), CPU, algorithm)
    if kind == "vectorised-flat":
        trainer.by_views = False
    return trainer


def _algorithm(name: str, **options):
    opts = registry.get("algorithm", name).options(**options)
    return build_algorithm(name, opts, num_params=8, device=CPU, lr=LR)


def _hand_local(w0: np.ndarray, client: int, correction) -> np.ndarray:
    """Two plain SGD steps of client 0 or 1 from ``w0`` with ``correction(w) -> extra gradient``."""
    w = w0.copy()
    for step in range(2):
        row = 2 * client + step
        w = w - LR * (hand_grad(w, [row]) + correction(w))
    return w


def _run(kind, algorithm, ctx):
    w0 = _flat(_model())
    out = _trainer(kind, algorithm).train(w0, _plan(), _data(), ctx)
    returned = algorithm.finish(out.delta, out.steps, ctx)
    return w0.numpy().astype(np.float64), out.delta.numpy().copy(), returned


PATHS = ["vectorised", "vectorised-flat", "sequential"]


@pytest.mark.parametrize("kind", PATHS)
def test_fedavg_is_plain_local_sgd_and_adds_no_per_step_work(kind):
    algorithm = _algorithm("fedavg")
    assert not algorithm.corrects and algorithm.trivial
    w0, delta, returned = _run(kind, algorithm, GroupContext())
    assert returned == {}
    for i in range(2):
        expected = _hand_local(w0, i, lambda w: 0.0) - w0
        np.testing.assert_allclose(delta[i], expected, atol=1e-6)


@pytest.mark.parametrize("kind", PATHS)
def test_fedprox_adds_mu_times_the_distance_to_the_received_model(kind):
    mu = 0.7
    w0, delta, _ = _run(kind, _algorithm("fedprox", mu=mu), GroupContext())
    for i in range(2):
        expected = _hand_local(w0, i, lambda w: mu * (w - w0)) - w0
        np.testing.assert_allclose(delta[i], expected, atol=1e-6)
    plain = _hand_local(w0, 0, lambda w: 0.0) - w0
    assert np.abs(delta[0] - plain).max() > 1e-4  # the proximal term did something


@pytest.mark.parametrize("kind", PATHS)
def test_scaffold_corrects_each_step_and_updates_the_control_variates_option_ii(kind):
    gen = np.random.default_rng(1)
    c = gen.normal(size=8).astype(np.float32) * 0.1
    c_i = gen.normal(size=(2, 8)).astype(np.float32) * 0.1
    algorithm = _algorithm("scaffold")
    ctx = GroupContext({"c": torch.from_numpy(c)}, {"c_i": torch.from_numpy(c_i.copy())})
    w0, delta, returned = _run(kind, algorithm, ctx)
    for i in range(2):
        y = _hand_local(w0, i, lambda w, i=i: c - c_i[i])
        np.testing.assert_allclose(delta[i], y - w0, atol=1e-6)
        new_c_i = c_i[i] - c + (w0 - y) / (2 * LR)  # K = 2 local steps
        np.testing.assert_allclose(ctx.state["c_i"][i].numpy(), new_c_i, atol=1e-5)
        np.testing.assert_allclose(returned["c_delta"][i].numpy(), new_c_i - c_i[i], atol=1e-5)
    # The server: c ← c + (1/N)·Σ Δc_i; the model step is the server strategy's.
    server = {"c": torch.from_numpy(c.copy())}
    sums = {"c_delta": returned["c_delta"].sum(0)}
    algorithm.fold(server, None, sums, torch.tensor(2.0), N_CLIENTS)
    np.testing.assert_allclose(server["c"].numpy(), c + returned["c_delta"].numpy().sum(0) / N_CLIENTS, atol=1e-6)


@pytest.mark.parametrize("kind", PATHS)
def test_feddyn_adds_its_linear_and_quadratic_terms_and_moves_the_server_model(kind):
    alpha = 0.5
    gen = np.random.default_rng(2)
    h_i = gen.normal(size=(2, 8)).astype(np.float32) * 0.1
    algorithm = _algorithm("feddyn", alpha=alpha)
    ctx = GroupContext({}, {"h_i": torch.from_numpy(h_i.copy())})
    w0, delta, returned = _run(kind, algorithm, ctx)
    for i in range(2):
        y = _hand_local(w0, i, lambda w, i=i: -h_i[i] + alpha * (w - w0))
        np.testing.assert_allclose(delta[i], y - w0, atol=1e-6)
        np.testing.assert_allclose(ctx.state["h_i"][i].numpy(), h_i[i] - alpha * (y - w0), atol=1e-6)
    h = gen.normal(size=8).astype(np.float32) * 0.1
    server = {"h": torch.from_numpy(h.copy())}
    avg = torch.from_numpy(delta.mean(0))
    algorithm.fold(server, avg, {"delta": returned["delta"].sum(0)}, torch.tensor(2.0), N_CLIENTS)
    new_h = h - alpha / N_CLIENTS * delta.sum(0)
    np.testing.assert_allclose(server["h"].numpy(), new_h, atol=1e-6)
    np.testing.assert_allclose(avg.numpy(), delta.mean(0) - new_h / alpha, atol=1e-6)


@pytest.mark.parametrize("kind", PATHS)
def test_ditto_trains_personal_models_towards_the_global_one_and_the_global_model_as_fedavg(kind):
    lam = 0.4
    gen = np.random.default_rng(3)
    v = gen.normal(size=8).astype(np.float32) * 0.1
    rows = np.zeros((2, 9), dtype=np.float32)
    rows[0, :8], rows[0, 8] = v, 1.0  # client 1 has a personal model; client 3 has none yet
    ctx = GroupContext({}, {"personal": torch.from_numpy(rows.copy())})
    w0, delta, _ = _run(kind, _algorithm("ditto", lam=lam), ctx)
    for i, v_start in enumerate([v.astype(np.float64), w0]):
        np.testing.assert_allclose(delta[i], _hand_local(w0, i, lambda w: 0.0) - w0, atol=1e-6)
        personal = _hand_local(v_start, i, lambda w: lam * (w - w0))
        np.testing.assert_allclose(ctx.state["personal"][i, :8].numpy(), personal, atol=1e-6)
        assert ctx.state["personal"][i, 8] == 1.0


@pytest.mark.parametrize("name,options", [("fedprox", {"mu": 0.7}), ("scaffold", {}), ("feddyn", {"alpha": 0.5})])
def test_the_vectorised_and_sequential_paths_agree(name, options):
    results = []
    for kind in PATHS:
        algorithm = _algorithm(name, **options)
        gen = np.random.default_rng(4)
        server = {k: torch.from_numpy(gen.normal(size=8).astype(np.float32)) for k in algorithm.server_state()}
        state = {
            k: torch.from_numpy(gen.normal(size=(2, w)).astype(np.float32)) for k, w in algorithm.client_state().items()
        }
        ctx = GroupContext(server, state)
        _w0, delta, returned = _run(kind, algorithm, ctx)
        results.append((delta, {k: v.numpy().copy() for k, v in ctx.state.items()}, returned))
    (d1, s1, r1), *others = results
    for d2, s2, r2 in others:
        np.testing.assert_allclose(d1, d2, atol=1e-6)
        for k in s1:
            np.testing.assert_allclose(s1[k], s2[k], atol=1e-6)
        for k in r1:
            np.testing.assert_allclose(r1[k].numpy(), r2[k].numpy(), atol=1e-6)


class _Counting:
    """Counts the calls of an algorithm's two per-step hooks (the algorithm's own rule still runs)."""

    def __init__(self, algorithm):
        self.calls = {"correct": 0, "correct_weights": 0}
        for hook in self.calls:
            setattr(algorithm, hook, self._counted(hook, getattr(algorithm, hook)))

    def _counted(self, hook, fn):
        def counted(*args):
            self.calls[hook] += 1
            fn(*args)

        return counted


@pytest.mark.parametrize("name,options", [("fedprox", {"mu": 0.7}), ("scaffold", {}), ("feddyn", {"alpha": 0.5})])
def test_plain_sgd_steps_by_parameter_with_the_weight_form_of_the_correction(name, options):
    algorithm = _algorithm(name, **options)
    counting = _Counting(algorithm)
    state = {k: torch.zeros(2, w) for k, w in algorithm.client_state().items()}
    _trainer("vectorised", algorithm).train(
        _flat(_model()), _plan(), _data(), GroupContext(algorithm.server_state(), state)
    )
    assert counting.calls == {"correct": 0, "correct_weights": 2}  # one per step, for both clients at once


def test_momentum_steps_on_the_flat_gradient_with_the_gradient_form_of_the_correction():
    algorithm = _algorithm("scaffold")
    counting = _Counting(algorithm)
    ctx = GroupContext(algorithm.server_state(), {"c_i": torch.zeros(2, 8)})
    _trainer("vectorised", algorithm, LocalSpec(lr=LR, momentum=0.9)).train(_flat(_model()), _plan(), _data(), ctx)
    assert counting.calls == {"correct": 2, "correct_weights": 0}


class _HalvedSteps(ClientAlgorithm):
    """A plugin written before ``correct_weights``: only the flat gradient hook."""

    corrects = True

    def correct(self, g, w, start, ctx):
        g.mul_(0.5)


@pytest.mark.parametrize("kind", PATHS)
def test_an_algorithm_with_only_the_gradient_hook_is_still_honoured(kind):
    algorithm = _HalvedSteps(num_params=8, device=CPU, lr=LR, options=None)
    w0, delta, _ = _run(kind, algorithm, GroupContext())
    for i in range(2):
        plain = _hand_local(w0, i, lambda w: 0.0) - w0
        halved = w0.copy()
        for step in range(2):
            halved = halved - LR * 0.5 * hand_grad(halved, [2 * i + step])
        np.testing.assert_allclose(delta[i], halved - w0, atol=1e-6)
        assert np.abs(delta[i] - plain).max() > 1e-4  # the hook did something


def test_client_round_allocates_its_buffers_once():
    algorithm = _algorithm("scaffold")
    store = InMemoryStateStore(N_CLIENTS, 8)
    client = ClientRound.create(algorithm, {"c_i": store}, CPU)
    assert set(client.server) == {"c"} and set(client.sums) == {"c_delta"}
    client.sums["c_delta"].fill_(3.0)
    client.reported.fill_(2.0)
    sums = client.sums["c_delta"]
    client.zero_()
    assert client.sums["c_delta"] is sums and float(sums.abs().sum()) == 0.0 and float(client.reported) == 0.0
    assert copy.copy(algorithm).client_state() == {"c_i": 8}
