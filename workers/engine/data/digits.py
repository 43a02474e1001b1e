"""scikit-learn's bundled handwritten digits (1,797 real 8x8 images): works offline, instantly."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from workers.engine.data.partition import holdout
from workers.engine.data.pool import Pool
from workers.engine.spec import DataSpec


def load(spec: DataSpec, rng: np.random.Generator) -> Pool:
    """Float32 images in [0, 1], shape [N, 1, S, S] with S = ``spec.image_size`` (8 native, or 28
    by bilinear resizing so EMNIST-sized models fit); a stratified ``test_fraction`` is held out."""
    from sklearn.datasets import load_digits  # reads a small file shipped inside scikit-learn

    bunch = load_digits()
    x = torch.from_numpy(bunch.images.astype(np.float32) / 16.0).unsqueeze(1)  # values are 0..16
    if spec.image_size != 8:
        size = (spec.image_size, spec.image_size)
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False).clamp_(0.0, 1.0)
    y = torch.from_numpy(bunch.target.astype(np.int64))
    train, test = holdout(bunch.target, spec.test_fraction, rng)
    return Pool(
        x_train=x[train],
        y_train=y[train],
        x_test=x[test],
        y_test=y[test],
        num_classes=10,
        input_shape=(1, spec.image_size, spec.image_size),
    )
