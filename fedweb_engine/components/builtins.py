"""The built-in components: importing this module registers them (``registry.ensure_builtins``).

They register exactly as a plugin does, with the decorators of
:mod:`fedweb_engine.components.registry`; what differs is that each factory is named as
``"module:attribute"`` instead of being decorated where it is defined. The registry keeps the
name, the options (:mod:`~fedweb_engine.components.builtin_options`) and the traits, and imports
the factory's module (and with it torch) the first time the component is built or checked. So a
process that only validates specs and draws forms, the web server, never imports torch; a plugin
may register the same way for the same reason. The help text is the first paragraph of each
factory's docstring, read from its source without importing it.

The order within a kind is the order the form lists them in.
"""

from __future__ import annotations

from fedweb_engine.components import registry
from fedweb_engine.components.builtin_options import (
    AdagradOptions,
    AdamOptions,
    Cifar10Options,
    DigitsOptions,
    DittoOptions,
    EmnistH5Options,
    FedAvgMOptions,
    FedDynOptions,
    FedProxOptions,
    FemnistLeafOptions,
    KrumOptions,
    MLPOptions,
    NpzOptions,
    SyntheticImagesOptions,
    SyntheticOptions,
    TokensOptions,
    TopKOptions,
    TrimmedMeanOptions,
    VGGOptions,
)

MODELS, DATA, STRATEGIES, ALGORITHMS = (f"fedweb_engine.{p}" for p in ("models", "data", "strategies", "algorithms"))
CODECS = "fedweb_engine.communication.codec_options"

registry.model("logistic", vmappable=True)(f"{MODELS}.logistic:logistic")
registry.model("mlp", MLPOptions, vmappable=True)(f"{MODELS}.mlp:mlp")
registry.model("cnn", vmappable=True)(f"{MODELS}.cnn:cnn")
registry.model("vgg", VGGOptions, vmappable=True)(f"{MODELS}.vgg:vgg")
registry.model("lm14m", task="lm", vmappable=True)(f"{MODELS}.lm:lm14m")


def _dataset(name: str, options: type, module: str, load: str = "load", describe: str = "describe", **traits):
    """A built-in dataset: its loader and ``describe`` in ``fedweb_engine.data.datasets.<module>``, with context."""
    where = f"{DATA}.datasets.{module}"
    registry.dataset(name, options, describe=f"{where}:{describe}", context=True, **traits)(f"{where}:{load}")


_dataset("digits", DigitsOptions, "digits")
_dataset("synthetic", SyntheticOptions, "synthetic", natural=True)
_dataset("synthetic_images", SyntheticImagesOptions, "images", natural=True)
_dataset("emnist_h5", EmnistH5Options, "emnist", "load_h5", "describe_h5", natural=True)
_dataset("femnist_leaf", FemnistLeafOptions, "emnist", "load_leaf", "describe_leaf", natural=True)
_dataset("cifar10", Cifar10Options, "cifar10")
_dataset("tokens", TokensOptions, "tokens", task="lm", natural=True)
_dataset("npz", NpzOptions, "npz", natural=True)

registry.strategy("fedavg")(f"{STRATEGIES}.fedavg:fedavg")
registry.strategy("fedavgm", FedAvgMOptions, moments=1)(f"{STRATEGIES}.fedavgm:fedavgm")
registry.strategy("fedadam", AdamOptions, server_optimizer="adam", moments=2)(f"{STRATEGIES}.fedadam:fedadam")
registry.strategy("fedyogi", AdamOptions, server_optimizer="yogi", moments=2)(f"{STRATEGIES}.fedyogi:fedyogi")
registry.strategy("fedadagrad", AdagradOptions, server_optimizer="adagrad", moments=1)(
    f"{STRATEGIES}.fedadagrad:fedadagrad"
)
# Byzantine-robust rules: whole-cohort strategies (they step on every client's update).
registry.strategy("median", needs_updates=True)(f"{STRATEGIES}.robust:Median")
registry.strategy("trimmed_mean", TrimmedMeanOptions, needs_updates=True)(f"{STRATEGIES}.robust:TrimmedMean")
registry.strategy("krum", KrumOptions, needs_updates=True)(f"{STRATEGIES}.robust:Krum")

registry.codec("fp32", codec_id=1)(f"{CODECS}:fp32")
registry.codec("fp16", codec_id=2)(f"{CODECS}:fp16")
registry.codec("int8", codec_id=3)(f"{CODECS}:int8")
registry.codec("topk", TopKOptions, codec_id=4)(f"{CODECS}:topk")

# What the spec's checks ask of a client algorithm, declared so that they need not build it (a
# test holds each declaration to what the built algorithm says).
registry.algorithm("fedavg", trivial=True, changes_update=False)(f"{ALGORITHMS}.fedavg:FedAvgClient")
registry.algorithm("fedprox", FedProxOptions, trivial=True, changes_update=False)(f"{ALGORITHMS}.fedprox:FedProxClient")
registry.algorithm("scaffold", trivial=False, changes_update=False)(f"{ALGORITHMS}.scaffold:Scaffold")
registry.algorithm("feddyn", FedDynOptions, trivial=False, changes_update=True)(f"{ALGORITHMS}.feddyn:FedDyn")
registry.algorithm("ditto", DittoOptions, trivial=False, changes_update=False)(f"{ALGORITHMS}.ditto:Ditto")
