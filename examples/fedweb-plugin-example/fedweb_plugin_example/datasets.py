"""``stripes``: generated images whose class is the orientation of their stripes.

Everything comes from the options and the ``rng`` FedWeb passes in, so the same seed gives the
same data on every worker; nothing is downloaded or read.
"""

from dataclasses import dataclass

import numpy as np
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DatasetShape, option
from fedweb_engine.data.pool import Pool


@dataclass(frozen=True)
class StripesOptions:
    num_samples: int = option(2000, "Images to generate (training and test together).", min=10, max=200_000)
    num_classes: int = option(4, "Stripe orientations, one per class.", min=2, max=32)
    noise: float = option(0.3, "Standard deviation of the pixel noise.", min=0.0, max=5.0)
    side: int = option(16, "Image side in pixels.", min=4, max=64)
    writers: int = option(10, "Writers (natural clients); each draws stripes at their own frequency.", min=1)


def describe(options: StripesOptions) -> DatasetShape:
    shape = (1, options.side, options.side)
    return DatasetShape(shape, options.num_classes, options.num_samples, 4 * options.side**2 + 8)


@registry.dataset("stripes", StripesOptions, natural=True, describe=describe)
def stripes(options: StripesOptions, rng: np.random.Generator) -> Pool:
    """Float images in [0, 1]; no test set, so FedWeb holds out ``data.test_fraction``."""
    n, side = options.num_samples, options.side
    labels = rng.integers(options.num_classes, size=n)
    writer = np.sort(rng.integers(options.writers, size=n))  # rows sorted by writer
    frequency = rng.uniform(1.5, 3.0, options.writers)[writer]  # a writer's own hand
    angle = np.pi * labels / options.num_classes
    phase = rng.uniform(0, 2 * np.pi, n)
    yy, xx = np.mgrid[0:side, 0:side] / side
    along = np.cos(angle)[:, None, None] * xx + np.sin(angle)[:, None, None] * yy
    wave = np.sin(2 * np.pi * frequency[:, None, None] * along + phase[:, None, None])
    pixels = 0.5 + 0.4 * wave + options.noise * rng.standard_normal((n, side, side))
    x = torch.from_numpy(np.clip(pixels, 0, 1).astype(np.float32)).unsqueeze(1)
    return Pool(
        x_train=x,
        y_train=torch.from_numpy(labels.astype(np.int64)),
        x_test=None,
        y_test=None,
        num_classes=options.num_classes,
        input_shape=(1, side, side),
        writer_ids=writer,
        writer_names=[f"writer_{i}" for i in range(options.writers)],
    )
