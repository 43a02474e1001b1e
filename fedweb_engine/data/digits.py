"""scikit-learn's bundled handwritten digits (1,797 real 8x8 images): works offline, instantly."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext, DatasetShape, option
from fedweb_engine.data.partition import holdout
from fedweb_engine.data.pool import Pool

SAMPLES = 1797  # scikit-learn's bundled digits, train and test together


@dataclass(frozen=True)
class DigitsOptions:
    image_size: int = option(28, "Side of the images for digits (8 = native, 28 = EMNIST-sized).", choices=(8, 28))


def describe(options: DigitsOptions, context: DataContext) -> DatasetShape:
    side = options.image_size
    train = round(SAMPLES * (1 - context.test_fraction))
    return DatasetShape((1, side, side), 10, train, 4 * side * side + 8)  # float32 pixels, int64 label


@registry.dataset("digits", DigitsOptions, describe=describe, context=True)
def load(options: DigitsOptions, rng: np.random.Generator, context: DataContext) -> Pool:
    """Float32 images in [0, 1], shape [N, 1, S, S] with S = ``image_size`` (8 native, or 28
    by bilinear resizing so EMNIST-sized models fit); a stratified ``test_fraction`` is held out."""
    from sklearn.datasets import load_digits  # reads a small file shipped inside scikit-learn

    bunch = load_digits()
    x = torch.from_numpy(bunch.images.astype(np.float32) / 16.0).unsqueeze(1)  # values are 0..16
    if options.image_size != 8:
        size = (options.image_size, options.image_size)
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False).clamp_(0.0, 1.0)
    y = torch.from_numpy(bunch.target.astype(np.int64))
    train, test = holdout(bunch.target, context.test_fraction, rng)
    return Pool(
        x_train=x[train],
        y_train=y[train],
        x_test=x[test],
        y_test=y[test],
        num_classes=10,
        input_shape=(1, options.image_size, options.image_size),
    )
