"""FedProx's Synthetic(α, β) benchmark (Li et al., MLSys 2020, ``generate_synthetic.py``).

Device k has its own softmax model W_k, b_k ~ N(u_k, 1), u_k ~ N(0, α) (model heterogeneity) and
its own inputs x ~ N(v_k, Σ), v_k ~ N(B_k, 1), B_k ~ N(0, β) (data heterogeneity), with
Σ_jj = j^-1.2; labels are y = argmax(W_k x + b_k). As in the reference code, α and β are used as
standard deviations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext, DatasetShape, option
from fedweb_engine.data.pool import Pool

DIMENSION = 60
NUM_CLASSES = 10
MAX_DEVICE_SAMPLES = 2000  # lognormal(4, 2) has a tail in the hundreds of thousands
# Mean samples per device: lognormal(4, 2) + 50, capped at 2,000 (measured over 2,000,000 draws: 289.4).
MEAN_SAMPLES = 290


@dataclass(frozen=True)
class SyntheticOptions:
    alpha: float = option(1.0, "Synthetic(α, β): model heterogeneity α.", min=0, max=100)
    beta: float = option(1.0, "Synthetic(α, β): data heterogeneity β.", min=0, max=100)


def describe(options: SyntheticOptions, context: DataContext) -> DatasetShape:
    train = round(context.num_clients * MEAN_SAMPLES * (1 - context.test_fraction))
    return DatasetShape((DIMENSION,), NUM_CLASSES, train, 4 * DIMENSION + 8)


@registry.dataset("synthetic", SyntheticOptions, natural=True, describe=describe, context=True)
def load(options: SyntheticOptions, rng: np.random.Generator, context: DataContext) -> Pool:
    """One device per client; ``test_fraction`` of every device's samples pooled into the test set."""
    k = context.num_clients
    sizes = np.minimum(rng.lognormal(4, 2, k).astype(np.int64) + 50, MAX_DEVICE_SAMPLES)
    u = rng.normal(0, options.alpha, k)
    b_mean = rng.normal(0, options.beta, k)
    v = rng.normal(b_mean[:, None], 1, (k, DIMENSION))
    w = rng.normal(u[:, None, None], 1, (k, DIMENSION, NUM_CLASSES))
    b = rng.normal(u[:, None], 1, (k, NUM_CLASSES))
    std = np.arange(1, DIMENSION + 1) ** -0.6  # sqrt of Σ_jj = j^-1.2

    device = np.repeat(np.arange(k), sizes)
    x = v[device] + rng.standard_normal((len(device), DIMENSION)) * std
    y = np.empty(len(device), dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)))
    for i in range(k):  # a small matmul per device; gathering W per sample would cost N x 600 floats
        rows = slice(starts[i], starts[i + 1])
        y[rows] = np.argmax(x[rows] @ w[i] + b[i], axis=1)  # softmax is monotone: argmax is enough

    # Samples within a device are i.i.d., so the last share of each device is a fair test split.
    n_test = np.round(sizes * context.test_fraction).astype(np.int64)
    is_test = (np.arange(len(device)) - starts[device]) >= (sizes - n_test)[device]
    x = torch.from_numpy(x.astype(np.float32))
    y = torch.from_numpy(y)
    train = torch.from_numpy(~is_test)
    return Pool(
        x_train=x[train],
        y_train=y[train],
        x_test=x[~train],
        y_test=y[~train],
        num_classes=NUM_CLASSES,
        input_shape=(DIMENSION,),
        writer_ids=device[~is_test],
        writer_names=[f"device_{i}" for i in range(k)],
    )
