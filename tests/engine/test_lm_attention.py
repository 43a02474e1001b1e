"""The language model's vectorised step: written-out causal attention (vmap has a batching rule
for every op of it, unlike the fused SDPA backward), equal to SDPA, probed as vectorisable, and
its vectorised gradients equal to per-client ones."""

import pytest
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad

from fedweb_engine.models.lm import LM14M, causal_attention
from fedweb_engine.spec.schema import LocalSpec
from fedweb_engine.training import vmap_probe
from fedweb_engine.training.client import VectorTrainer, task_loss


def test_the_written_out_attention_equals_sdpa():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 9, 32, generator=g) for _ in range(3))

    ours = causal_attention(q, k, v)

    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def lm():
    model = LM14M()
    model.init_parameters(torch.Generator().manual_seed(0))
    return model


def _tokens(clients: int, rows: int, t: int = 6):
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 1000, (clients, rows, t + 1), generator=g)


def test_the_vmap_probe_finds_the_lm_vectorisable_with_no_per_client_loop(lm, recwarn):
    seq = _tokens(1, 2)[0]
    reason = vmap_probe.probe(lm, seq[:, :-1], seq[:, 1:], torch.device("cpu"))
    assert reason is None
    assert not [w for w in recwarn if "batching rule" in str(w.message)]


@pytest.mark.slow
def test_vectorised_lm_gradients_equal_per_client_ones(lm, recwarn):
    clients = 2
    seq = _tokens(clients, 2)
    x, y = seq[..., :-1], seq[..., 1:]
    trainer = VectorTrainer(lm, clients, LocalSpec(lr=0.1), torch.device("cpu"))
    flat = torch.cat([p.detach().reshape(-1) for p in lm.parameters()])
    w = torch.stack([flat, flat + 1e-3])  # two clients with different weights
    mask = torch.ones(clients, 2)

    grads, losses = trainer.gradients(w, x, y, mask)

    names = [n for n, _ in lm.named_parameters()]
    for i in range(clients):
        params = dict(zip(names, trainer._unflatten(w[i]).values(), strict=True))

        def loss(p, i=i):
            return task_loss(functional_call(lm, p, (x[i],)), y[i]).mean()

        want = torch.cat([g.reshape(-1) for g in grad(loss)(params).values()])
        torch.testing.assert_close(grads[i], want, rtol=1e-4, atol=1e-6)
    # vmap warns when an op has no batching rule and it falls back to a per-client loop (SDPA did)
    assert not [w for w in recwarn if "batching rule" in str(w.message)]
