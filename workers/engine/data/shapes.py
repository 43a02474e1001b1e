"""What a dataset will look like, from its spec alone: no file is opened and nothing is generated.

The one place that mirrors the loaders' shapes; the new-experiment page, the capacity check and
the loaders' own constants agree because they are read from here or from the loader modules.
"""

from __future__ import annotations

from workers.engine.spec import DataSpec

DIGITS_SAMPLES = 1797  # scikit-learn's bundled digits, train and test together
CIFAR10_SAMPLES = 60_000
# Mean samples per device of the synthetic benchmark: lognormal(4, 2) + 50, capped at 2,000
# (measured over 2,000,000 draws: 289.4).
SYNTHETIC_MEAN_SAMPLES = 290


def input_shape_of(data: DataSpec) -> tuple[tuple[int, ...], int]:
    """(shape of one sample, classes) of ``data.dataset``; for tokens, (sequence length, vocabulary)."""
    from workers.engine.data import images, synthetic, tokens

    if data.dataset == "digits":
        return (1, data.image_size, data.image_size), 10
    if data.dataset == "synthetic":
        return (synthetic.DIMENSION,), synthetic.NUM_CLASSES
    if data.dataset == "synthetic_images":
        return (1, images.SIDE, images.SIDE), data.num_classes
    if data.dataset == "tokens":
        return (data.seq_len,), tokens.VOCAB
    if data.dataset == "cifar10":
        return (3, 32, 32), 10
    return (1, 28, 28), 62 if data.dataset == "femnist_leaf" else 10


def sample_count(data: DataSpec) -> int | None:
    """Training plus test samples the loader will hold; None for EMNIST/LEAF files (unknown
    until read). Generated datasets are estimated from their means (within a few per cent)."""
    held_out = 1.0 / (1.0 - data.test_fraction)  # the test set is test_fraction of all samples
    if data.dataset == "digits":
        return DIGITS_SAMPLES
    if data.dataset == "cifar10":
        return CIFAR10_SAMPLES
    if data.dataset == "synthetic":
        return data.num_clients * SYNTHETIC_MEAN_SAMPLES
    if data.dataset in ("synthetic_images", "tokens"):
        return round(data.num_clients * data.mean_samples * held_out)
    return None


def bytes_per_sample(data: DataSpec) -> int:
    """Stored bytes of one sample and its label (uint8 images, float32 features, int64 tokens)."""
    shape, _ = input_shape_of(data)
    pixels = 1
    for side in shape:
        pixels *= side
    if data.dataset == "tokens":
        return 2 * 8 * pixels  # inputs and next tokens, int64 each
    if data.dataset in ("digits", "synthetic"):
        return 4 * pixels + 8  # float32 features, int64 label
    return pixels + 8  # uint8 pixels, int64 label


def dataset_bytes(data: DataSpec) -> int | None:
    """Memory of the loaded dataset (its tensors, not the loader's transient working memory)."""
    samples = sample_count(data)
    return None if samples is None else samples * bytes_per_sample(data)
