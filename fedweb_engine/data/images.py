"""Generated EMNIST/FEMNIST-shaped data: 28x28 grey images of ``num_classes`` classes by writers.

Learnable, not noise: every class has a smooth random glyph; every writer draws glyphs with their
own shift, stroke thickness, contrast and a small writer-specific distortion, and every sample adds
a jitter and pixel noise. A CNN (or even a nearest-centroid rule) separates the classes well, while
writers differ enough for the natural partition to be non-IID in feature space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext, DatasetShape, option
from fedweb_engine.data.pool import Pool, held_out_count, writer_sizes

SIDE = 28
MARGIN = 2  # glyphs are drawn on a (SIDE + 2 * MARGIN) canvas; shifts pick a SIDE x SIDE window
CHUNK = 8192  # samples rendered at once: bounds the float working memory to ~25 MB
NOISE_BANK = 4096
GAIN = 1.0  # slope of the ink ramp: grey range per field unit (higher = crisper strokes)
SHIFTS = 2 * MARGIN + 1


@dataclass(frozen=True)
class SyntheticImagesOptions:
    num_classes: int = option(10, "Classes of synthetic_images (10 digits or 62 FEMNIST).", choices=(10, 62))
    mean_samples: int = option(100, "Mean samples per client.", min=1, max=100_000, size=True)


def describe(options: SyntheticImagesOptions, context: DataContext) -> DatasetShape:
    return DatasetShape(
        (1, SIDE, SIDE), options.num_classes, context.num_clients * options.mean_samples, SIDE * SIDE + 8
    )


@registry.dataset("synthetic_images", SyntheticImagesOptions, natural=True, describe=describe, context=True)
def load(options: SyntheticImagesOptions, rng: np.random.Generator, context: DataContext) -> Pool:
    """uint8 images [N, 1, 28, 28] (background 0, ink up to 255), ``num_clients`` writers with
    lognormal sizes of mean ``mean_samples`` (min 10); the test set is drawn from the same
    writers and makes up about ``test_fraction`` of all samples."""
    k, c = context.num_clients, options.num_classes
    torch_gen = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
    glyphs = _glyphs(c, torch_gen)
    styles = _writer_styles(k, rng, torch_gen)

    sizes = writer_sizes(k, options.mean_samples, rng)
    train_writer = np.repeat(np.arange(k), sizes)
    test_writer = np.sort(rng.integers(k, size=held_out_count(len(train_writer), context.test_fraction)))
    x_train, y_train = _render(train_writer, c, glyphs, styles, rng, torch_gen)
    x_test, y_test = _render(test_writer, c, glyphs, styles, rng, torch_gen)
    return Pool(
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=c,
        input_shape=(1, SIDE, SIDE),
        writer_ids=train_writer,
        writer_names=[f"writer_{i}" for i in range(k)],
    )


def _smooth_field(n: int, gen: torch.Generator, coarse: int = 6, side: int = SIDE + 2 * MARGIN) -> torch.Tensor:
    """[n, side, side] smooth random fields with zero mean and unit variance per field."""
    noise = torch.randn(n, 1, coarse, coarse, generator=gen)
    field = F.interpolate(noise, size=(side, side), mode="bicubic", align_corners=False)[:, 0]
    field = field - field.mean(dim=(1, 2), keepdim=True)
    return field / field.std(dim=(1, 2), keepdim=True)


def _glyphs(num_classes: int, gen: torch.Generator) -> torch.Tensor:
    """[classes, SHIFTS**2, S, S]: each class's template field, faded towards the border so glyphs
    sit in the middle, cropped at every shift of up to MARGIN pixels."""
    side = SIDE + 2 * MARGIN
    r = torch.linspace(-1, 1, side)
    fade = torch.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / 0.8)
    canvas = _smooth_field(num_classes, gen) * fade + 1.5 * (fade - 1)
    crops = [canvas[:, dy : dy + SIDE, dx : dx + SIDE] for dy in range(SHIFTS) for dx in range(SHIFTS)]
    return torch.stack(crops, dim=1).contiguous()


def _writer_styles(k: int, rng: np.random.Generator, gen: torch.Generator) -> dict[str, torch.Tensor]:
    return {
        "distortion": 0.35 * _smooth_field(k, gen, coarse=4, side=SIDE),
        "threshold": torch.from_numpy(rng.uniform(-0.4, 0.3, k).astype(np.float32)),  # lower = thicker
        "contrast": torch.from_numpy(rng.uniform(0.5, 1.0, k).astype(np.float32)),
        "shift": torch.from_numpy(rng.integers(-1, 2, (k, 2))),
    }


def _render(writer, num_classes, glyphs, styles, rng, gen) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw one sample per entry of ``writer``: a uniformly random class in that writer's style."""
    n = len(writer)
    labels = torch.from_numpy(rng.integers(num_classes, size=n))
    writer_t = torch.from_numpy(writer)
    # Writer shift plus a per-sample jitter of one pixel, as an index into the precomputed crops.
    shift = (styles["shift"][writer_t] + torch.from_numpy(rng.integers(-1, 2, (n, 2)))).clamp_(-MARGIN, MARGIN)
    shift_id = (shift[:, 0] + MARGIN) * (2 * MARGIN + 1) + (shift[:, 1] + MARGIN)
    # Noise patterns are drawn from a bank: indexing is much cheaper than fresh Gaussians per pixel.
    bank = 0.15 * torch.randn(NOISE_BANK, SIDE, SIDE, generator=gen)
    noise_id = torch.from_numpy(rng.integers(NOISE_BANK, size=n))
    # Affine map from field to grey level: ink = clamp((field - threshold) * gain + 0.5, 0, 1), where a
    # writer's contrast scales the gain (faint writers have soft, grey strokes).
    gain = (GAIN * 255.0) * styles["contrast"][writer_t]
    bias = 127.5 - gain * styles["threshold"][writer_t]
    # index_select on flat [rows, pixels] tables is several times faster than multi-index gathers.
    glyph_id = labels * SHIFTS**2 + shift_id
    glyphs, distortion, bank = glyphs.flatten(0, 1).flatten(1), styles["distortion"].flatten(1), bank.flatten(1)
    out = torch.empty(n, SIDE * SIDE, dtype=torch.uint8)
    field, extra = torch.empty(CHUNK, SIDE * SIDE), torch.empty(CHUNK, SIDE * SIDE)  # reused buffers
    for start in range(0, n, CHUNK):
        rows = slice(start, min(start + CHUNK, n))
        m = rows.stop - rows.start
        torch.index_select(glyphs, 0, glyph_id[rows], out=field[:m])
        torch.index_select(distortion, 0, writer_t[rows], out=extra[:m])
        field[:m] += extra[:m]
        torch.index_select(bank, 0, noise_id[rows], out=extra[:m])
        field[:m] += extra[:m]
        field[:m].mul_(gain[rows, None]).add_(bias[rows, None]).clamp_(0.0, 255.0)
        out[rows] = field[:m]
    return out.view(n, 1, SIDE, SIDE), labels
