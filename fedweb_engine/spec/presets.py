"""Named experiment presets: the workloads of the user reports and papers FedWeb is measured on.

A preset is a partial spec (defaults fill the rest). ``variants`` (optional) are partial specs
run one after another on top of it, e.g. the same workload with three codecs.
"""

from __future__ import annotations

from typing import Any

from fedweb_engine.spec.schema import Spec

# The cohort sizes of the TFF memory report (45 rounds between 80 and 120 participants).
VARYING_SCHEDULE = [
    108, 113, 93, 92, 114, 101, 94, 93, 107, 99, 118, 101, 114, 111, 88, 101, 86, 96, 110, 80, 118, 84, 91,
    120, 110, 109, 113, 96, 112, 107, 119, 91, 97, 99, 97, 104, 103, 120, 89, 100, 104, 104, 103, 88, 108,
]  # fmt: skip

PRESETS: dict[str, dict[str, Any]] = {
    "quickstart": {
        "title": "Quickstart: digits with a CNN",
        "description": "scikit-learn's handwritten digits (28×28), the FEMNIST CNN, Dirichlet(0.5) over 100 clients, "
        "10 clients per round, FedAvg. Reaches about 90% test accuracy on a CPU in a minute or two.",
        "spec": {
            "rounds": 45,
            "data": {"name": "digits", "num_clients": 100, "partition": "dirichlet", "alpha": 0.5},
            "model": {"name": "cnn"},
            "participation": {"clients_per_round": 10},
            "local": {"epochs": 2, "batch_size": 10, "lr": 0.05, "momentum": 0.5},
            "compute": {"client_group_size": 10},
        },
    },
    "varying-participants": {
        "title": "Varying participants (the TFF memory report)",
        "description": "45 rounds whose cohorts vary between 80 and 120 of 500 clients, 5 local epochs, batch 20, "
        "the 784→10 softmax model on EMNIST-shaped data. In the report VRAM grew 0.8 GB per round; "
        "here memory stays flat.",
        "spec": {
            "rounds": 45,
            "data": {
                "name": "synthetic_images",
                "options": {"num_classes": 10},
                "num_clients": 500,
                "partition": "natural",
            },
            "model": {"name": "logistic"},
            "participation": {"schedule": VARYING_SCHEDULE},
            "local": {"epochs": 5, "batch_size": 20, "lr": 0.02},
            "compute": {"client_group_size": 128},
            "evaluation": {"every": 5},
        },
    },
    "tff-accelerators": {
        "title": "TFF simulations with accelerators (cnn-14-4)",
        "description": "The VGG-like cnn-14-4 (2.73M params), 16 clients per round of EMNIST-shaped writers, "
        "1 epoch, batch 16, SGD 0.01. TFF needed 5.0 s/round on a GPU.",
        "spec": {
            "rounds": 10,
            "data": {
                "name": "synthetic_images",
                "options": {"num_classes": 10},
                "num_clients": 3400,
                "partition": "natural",
            },
            "model": {"name": "vgg", "options": {"blocks": 2, "width": 4}},
            "participation": {"clients_per_round": 16},
            "local": {"epochs": 1, "batch_size": 16, "lr": 0.01},
            "compute": {"client_group_size": 16},
        },
    },
    "fedprox-stragglers": {
        "title": "FedProx with 90% stragglers",
        "description": "Synthetic(1,1) from the FedProx paper, 30 devices, 10 per round, 20 local epochs, 90% of "
        "each cohort are stragglers. FedProx (μ=1) aggregates their partial work; compare with FedAvg, "
        "which drops them (client algorithm fedavg, straggler_policy drop).",
        "spec": {
            "rounds": 40,
            "data": {
                "name": "synthetic",
                "options": {"alpha": 1.0, "beta": 1.0},
                "num_clients": 30,
                "partition": "natural",
            },
            "model": {"name": "logistic"},
            "algorithm": {"name": "fedavg", "client": {"name": "fedprox", "options": {"mu": 1.0}}},
            "participation": {"clients_per_round": 10},
            "local": {"epochs": 20, "batch_size": 10, "lr": 0.01},
            "heterogeneity": {"straggler_fraction": 0.9, "straggler_policy": "partial"},
        },
    },
    "bandwidth-lm14m": {
        "title": "Bandwidth of a 14M-parameter language model",
        "description": "pythia-14m-sized transformer (53 MB in fp32), 2 clients, 1 round, uplink fp32 vs int8 vs "
        "top-1%: measured bytes per client beside the fp32 formula.",
        "spec": {
            "rounds": 1,
            "data": {
                "name": "tokens",
                "options": {"mean_samples": 4, "seq_len": 32},
                "num_clients": 2,
                "partition": "natural",
            },
            "model": {"name": "lm14m"},
            "participation": {"clients_per_round": 2},
            "local": {"epochs": 1, "batch_size": 4, "lr": 0.01},
            "evaluation": {"batch_size": 8},
        },
        "variants": [
            {"communication": {"uplink": {"name": "fp32"}}},
            {"communication": {"uplink": {"name": "int8"}}},
            {"communication": {"uplink": {"name": "topk", "options": {"ratio": 0.01}}}},
        ],
    },
}


def preset_spec(name: str, variant: int | None = None) -> Spec:
    """The preset's spec (with one of its variants applied when given)."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}")
    spec = Spec.from_dict(PRESETS[name]["spec"])
    if variant is not None:
        spec = spec.replace(**PRESETS[name]["variants"][variant])
    return spec


def preset_specs(name: str) -> list[Spec]:
    """Every spec a preset runs: the variants when it has some, else the one spec."""
    variants = PRESETS[name].get("variants") if name in PRESETS else None
    if not variants:
        return [preset_spec(name)]
    return [preset_spec(name, i) for i in range(len(variants))]
