"""The options of the built-in components: frozen dataclasses of ``option`` fields, one per component.

They live here, not beside each component's code, because that code imports torch and these are
what a process that only validates specs and draws forms reads (the web server): the catalogue
(:mod:`fedweb_engine.components.builtins`) registers each built-in with its options from here and
its factory by name, imported when first built. Each component's module imports its options
from here too, so ``fedweb_engine.models.mlp.MLPOptions`` and the like still resolve.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedweb_engine.components.registry import option
from fedweb_engine.spec.validation import SpecError

MAX_PATH_LENGTH = 1024


def required_path(help: str):
    """The option of a dataset read from the user's files: a required path, relative to the datasets
    folder, confined there at submission and again before reading (``registry.option(path=True)``)."""
    return option(
        None, f"{help}, relative to the server's datasets folder.", nullable=True, max_length=MAX_PATH_LENGTH, path=True
    )


# -- models -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MLPOptions:
    hidden: int = option(200, "Hidden units of the mlp.", min=1, max=65_536, size=True)


@dataclass(frozen=True)
class VGGOptions:
    blocks: int = option(2, "VGG blocks: cnn-(6·blocks+2)-width.", min=1, max=8)
    width: int = option(4, "VGG width multiplier.", min=1, max=64, size=True)


# -- datasets -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DigitsOptions:
    image_size: int = option(28, "Side of the images for digits (8 = native, 28 = EMNIST-sized).", choices=(8, 28))


@dataclass(frozen=True)
class SyntheticOptions:
    alpha: float = option(1.0, "Synthetic(α, β): model heterogeneity α.", min=0, max=100)
    beta: float = option(1.0, "Synthetic(α, β): data heterogeneity β.", min=0, max=100)


@dataclass(frozen=True)
class SyntheticImagesOptions:
    num_classes: int = option(10, "Classes of synthetic_images (10 digits or 62 FEMNIST).", choices=(10, 62))
    mean_samples: int = option(100, "Mean samples per client.", min=1, max=100_000, size=True)


@dataclass(frozen=True)
class EmnistH5Options:
    path: str | None = required_path("TFF's fed_emnist_train.h5 (its test file beside it)")


@dataclass(frozen=True)
class FemnistLeafOptions:
    path: str | None = required_path("LEAF FEMNIST folder with train/ and test/")


@dataclass(frozen=True)
class Cifar10Options:
    path: str | None = required_path("Folder of cifar-10-batches-py")


@dataclass(frozen=True)
class TokensOptions:
    mean_samples: int = option(100, "Mean sequences per client.", min=1, max=100_000, size=True)
    seq_len: int = option(64, "Tokens per sequence.", min=2, max=2048)


@dataclass(frozen=True)
class NpzOptions:
    path: str = option("", "An .npz file, or a folder of one .npz per client, under the datasets folder.", path=True)
    x_key: str = option("x", "Name of the samples array ('x' in a client file, 'x_train'/'x_test' in one file).")
    y_key: str = option("y", "Name of the labels array ('y', or 'y_train'/'y_test').")
    num_classes: int = option(0, "Classes; 0 takes one more than the largest label.", min=0, max=1_000_000)


# -- server strategies --------------------------------------------------------------------------

BETA1_HELP = "First-moment decay of FedAdam/FedYogi/FedAdagrad."
TAU_HELP = "Adaptivity ε of FedAdam/FedYogi/FedAdagrad."


@dataclass(frozen=True)
class FedAvgMOptions:
    momentum: float = option(0.9, "Server momentum for FedAvgM.", min=0, max=0.999)


@dataclass(frozen=True)
class AdamOptions:
    beta1: float = option(0.9, BETA1_HELP, min=0, max=0.999)
    beta2: float = option(0.99, "Second-moment decay of FedAdam/FedYogi.", min=0, max=0.9999)
    tau: float = option(1e-3, TAU_HELP, min=0, min_open=True, max=1)


@dataclass(frozen=True)
class AdagradOptions:
    beta1: float = option(0.9, BETA1_HELP, min=0, max=0.999)
    tau: float = option(1e-3, TAU_HELP, min=0, min_open=True, max=1)


@dataclass(frozen=True)
class TrimmedMeanOptions:
    beta: float = option(
        0.1, "Share of the updates dropped from each end, per coordinate (⌊β·n⌋ each side).", min=0, max=0.5
    )

    def __post_init__(self):
        if not self.beta < 0.5:  # the field metadata has no open upper bound
            raise SpecError("algorithm.options.beta", "must be < 0.5 (trimming half from each end leaves nothing)")


@dataclass(frozen=True)
class KrumOptions:
    byzantine: int = option(1, "f: how many bad clients a round may hold.", min=0, max=10_000)
    multi: int = option(1, "m: updates averaged (1 = Krum, more = Multi-Krum).", min=1, max=10_000)


# -- client algorithms --------------------------------------------------------------------------


@dataclass(frozen=True)
class FedProxOptions:
    mu: float = option(0.01, "Proximal term μ: pulls each client towards the model it received.", min=0, max=1000)


@dataclass(frozen=True)
class FedDynOptions:
    alpha: float = option(0.01, "Regulariser weight α.", min=0, min_open=True, max=1000)


@dataclass(frozen=True)
class DittoOptions:
    lam: float = option(0.1, "λ: how strongly each personal model is pulled to the global model.", min=0, max=1000)


# -- codecs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TopKOptions:
    ratio: float = option(0.01, "Share of entries kept by top-k.", min=0, max=1, min_open=True)
