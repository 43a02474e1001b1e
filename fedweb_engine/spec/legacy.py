"""Specs written before components: the flat shape upgraded to ``{"name", "options"}`` sections.

Experiments stored in the database, checkpoints, saved sweeps and users' JSON files carry the old
flat spec (``{"data": {"dataset": "digits", "image_size": 28, ...}, "model": {"name": "cnn",
"hidden": 200, "blocks": 2, "width": 4}, "communication": {"uplink": "topk", "topk_ratio": 0.01}}``),
often with every old field present whatever was chosen. :func:`upgrade` rewrites such a dict into
today's shape before it is validated: an old option key moves into the chosen component's
``options`` when that component has the option (renamed where the name changed). One it does not
have never had any effect there: a stored spec (``strict=False``) drops it, so it still loads; a
new spec (``strict=True``: the form, the API, the CLI) is refused with the component's real
options, since whoever wrote it expected it to do something, unless it holds the old default
that a full dump of the old spec carried whatever was chosen (``OLD_DEFAULTS``). Keys that were never spec fields are
left alone, so validation still reports them. Pure: the input is not modified, nothing is stored.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import fedweb_engine.components.registry as registry
from fedweb_engine.spec.components import COMPONENT_SECTIONS, ClientAlgorithmSpec, DownlinkSpec, UplinkSpec
from fedweb_engine.spec.validation import SpecError

# The old flat option keys of each component section, and their names as component options.
OLD_OPTION_KEYS = {
    "model": {"hidden": "hidden", "blocks": "blocks", "width": "width"},
    "data": {
        "path": "path",
        "image_size": "image_size",
        "num_classes": "num_classes",
        "mean_samples": "mean_samples",
        "synthetic_alpha": "alpha",
        "synthetic_beta": "beta",
        "seq_len": "seq_len",
    },
    "algorithm": {"server_momentum": "momentum", "beta1": "beta1", "beta2": "beta2", "tau": "tau"},
}
# What a full dump of an old spec carried for each of those keys whatever component was chosen:
# a key at this value asked for nothing, so even a new spec (strict) may carry it and lose it.
OLD_DEFAULTS = {
    "model": {"hidden": 200, "blocks": 2, "width": 4},
    "data": {
        "path": None,
        "image_size": 28,
        "num_classes": 10,
        "mean_samples": 100,
        "synthetic_alpha": 1.0,
        "synthetic_beta": 1.0,
        "seq_len": 64,
    },
    "algorithm": {"server_momentum": 0.9, "beta1": 0.9, "beta2": 0.99, "tau": 0.001},
}
KIND_OF = {"model": "model", "data": "dataset", "algorithm": "strategy"}
LINKS = {"uplink": UplinkSpec, "downlink": DownlinkSpec}
OLD_RATIO_KEY, RATIO_OPTION = "topk_ratio", "ratio"


def upgrade(spec: Any, *, strict: bool = False, final: bool = True) -> Any:
    """``spec`` in today's shape (a copy); anything that is not an object is returned as it is.

    ``strict``: an old option key that the chosen component does not have raises
    :class:`SpecError` naming the component's options, instead of being dropped. ``final=False``
    leaves a server-side ``fedprox`` to the upgrade of the finished spec (a sweep's base, whose
    swept values may still name the fedprox client algorithm).
    """
    if not isinstance(spec, dict):
        return spec
    out = copy.deepcopy(spec)
    for section in OLD_OPTION_KEYS:
        if isinstance(out.get(section), dict):
            out[section] = _upgrade_component(section, out[section], strict)
    if isinstance(out.get("communication"), dict):
        out["communication"] = _upgrade_communication(out["communication"])
    if isinstance(out.get("algorithm"), dict):
        out["algorithm"] = _upgrade_mu(out["algorithm"], strict)
        if final:
            out["algorithm"] = _upgrade_server_fedprox(out["algorithm"], strict)
    return out


OLD_FEDPROX_STRATEGY = "fedprox"
FEDPROX_SERVER = "fedavg"  # the server step the old fedprox strategy took


def _upgrade_server_fedprox(d: dict, strict: bool) -> dict:
    """FedProx was also offered as a server strategy: FedAvg's server step under FedProx's name,
    whatever the clients did, so with the fedavg client algorithm a run was FedAvg labelled FedProx.
    FedProx is the client algorithm ``fedprox`` (with μ) and nothing else now. A stored spec that
    names it on the server side ran FedAvg's server step beside its client algorithm: it loads as
    ``fedavg`` with that client algorithm, which is what it computed. A new spec may still name it
    there beside the fedprox client algorithm (old μ included), which is plainly FedProx; beside any
    other it is refused, as it would be a FedProx label on another algorithm."""
    if d.get("name") != OLD_FEDPROX_STRATEGY:
        return d
    client = d.get("client")
    client_name = client.get("name", _default_name(ClientAlgorithmSpec)) if isinstance(client, dict) else None
    if strict and client_name != MU_ALGORITHM:
        raise SpecError(
            "algorithm.name",
            "'fedprox' is a client algorithm (local training with the proximal term μ), not a server strategy: "
            f"set algorithm.client.name to fedprox and its μ in algorithm.client.options.mu; the server "
            f"strategy stays {FEDPROX_SERVER} (the server step FedProx takes) or any other",
        )
    d["name"] = FEDPROX_SERVER
    if d.get("options") == {}:
        d.pop("options")  # the old strategy had no options: fedavg's defaults
    return d


OLD_MU_KEY = "mu"
CLIENT_MU = "client.options.mu"
MU_ALGORITHM = "fedprox"  # the client algorithm whose option μ now is


def _upgrade_mu(d: dict, strict: bool) -> dict:
    """FedProx's μ was ``algorithm.mu``, applied to every algorithm; it is the ``fedprox`` client
    algorithm's option now. ``mu > 0`` becomes that client algorithm, ``mu: 0`` FedAvg's client
    (what it did). A client section with no algorithm (or fedavg, which has no options) but a
    ``mu`` option is the old field set through its new path (a sweep over ``algorithm.mu``). In a
    new spec that also names FedProx on the server side, any μ (0 too) is FedProx's: the fedprox
    client algorithm with that μ, so the run is labelled what it is."""
    client = d.get("client")
    plain = _default_name(ClientAlgorithmSpec)
    if OLD_MU_KEY not in d:
        if isinstance(client, dict) and client.get("name", plain) == plain:
            options = client.get("options")
            if isinstance(options, dict) and set(options) == {OLD_MU_KEY}:
                client["name"] = MU_ALGORITHM
                _check_old_mu(options[OLD_MU_KEY], strict)  # named as it was written
        return d
    mu = d.pop(OLD_MU_KEY)
    number = isinstance(mu, (int, float)) and not isinstance(mu, bool)
    _check_old_mu(mu, strict)
    current = client.get("name") if isinstance(client, dict) else None
    if current is not None and current != plain and OLD_MU_KEY not in _option_names("algorithm", current):
        if strict and not (number and mu == 0):
            raise SpecError(
                "algorithm.mu", f"is FedProx's μ and the client algorithm is {current!r}: use algorithm.client.options"
            )
        return d
    plain_mu = number and mu == 0 and not (strict and d.get("name") == OLD_FEDPROX_STRATEGY)
    d["client"] = {"name": plain} if plain_mu else {"name": MU_ALGORITHM, "options": {OLD_MU_KEY: mu}}
    return d


def _check_old_mu(mu: Any, strict: bool) -> None:
    if strict and isinstance(mu, (int, float)) and not isinstance(mu, bool) and mu < 0:
        raise SpecError("algorithm.mu", "must be >= 0")


def legacy_field(dotted: str) -> str | None:
    """Today's dotted name of an old flat field (``model.width`` -> ``model.options.width``,
    ``data.dataset`` -> ``data.name``, ``communication.uplink`` -> ``communication.uplink.name``);
    None when ``dotted`` was not an old field (``communication.topk_ratio`` names two links: see
    :func:`upgrade`)."""
    section, _, name = dotted.partition(".")
    if section == "algorithm" and name == OLD_MU_KEY:
        return f"algorithm.{CLIENT_MU}"
    if section == "data" and name == "dataset":
        return "data.name"
    if section == "communication" and name in LINKS:
        return f"communication.{name}.name"
    new = OLD_OPTION_KEYS.get(section, {}).get(name)
    return f"{section}.options.{new}" if new else None


def _upgrade_component(section: str, d: dict, strict: bool) -> dict:
    if section == "data" and "dataset" in d:
        d["name"] = d.pop("dataset")
    old = {key: d.pop(key) for key in list(d) if key in OLD_OPTION_KEYS[section]}
    if not old:
        return d
    name = d.get("name", _default_name(COMPONENT_SECTIONS[section]))
    known = _option_names(KIND_OF[section], name)
    options = d.get("options") if isinstance(d.get("options"), dict) else {}
    for key, value in old.items():
        new = OLD_OPTION_KEYS[section][key]
        if new in known:
            options[new] = value
        elif strict and _registered(KIND_OF[section], name) and not _is_old_default(section, key, value):
            raise SpecError(f"{section}.{key}", not_an_option(section, name, known))
    d["options"] = options
    return d


def _upgrade_communication(d: dict) -> dict:
    ratio_given = OLD_RATIO_KEY in d
    ratio = d.pop(OLD_RATIO_KEY, None)
    for link in LINKS:
        value = d.get(link)
        if isinstance(value, str):  # a bare codec name
            value = d[link] = {"name": value}
        if ratio_given and isinstance(value, dict):
            if RATIO_OPTION in _option_names("codec", value.get("name", _default_name(LINKS[link]))):
                value.setdefault("options", {})
                if isinstance(value["options"], dict):
                    value["options"][RATIO_OPTION] = ratio
    return d


def not_an_option(section: str, name: str, known: set[str]) -> str:
    """The end of the message for an old key that component ``name`` of ``section`` has no option for."""
    listed = ", ".join(sorted(known)) if known else "none"
    return f"is not an option of {KIND_OF[section]} {name[:40]!r}: its options are {listed} (in {section}.options)"


def _default_name(section: type) -> str:
    return next(f.default for f in dataclasses.fields(section) if f.name == "name")


def _is_old_default(section: str, key: str, value: Any) -> bool:
    default = OLD_DEFAULTS[section][key]
    return value is default if default is None or isinstance(value, bool) else value == default


def _registered(kind: str, name: Any) -> bool:
    # An unknown name is validation's to report (it lists the registered names).
    return isinstance(name, str) and name in registry.names(kind)


def _option_names(kind: str, name: Any) -> set[str]:
    # An unknown (or not even string) name keeps no option: validation then names the bad name.
    try:
        return {f.name for f in dataclasses.fields(registry.get(kind, name).options)}
    except (registry.UnknownComponent, TypeError):
        return set()


def compute_ranks(compute: Any) -> Any:
    """The ``compute`` section with ``ranks: "auto"`` stored as 0 (the field is an integer). Specs
    written before ranks split a round with ``compute.shards``, which means the same and reads as ranks.
    ``compute.compile`` was a boolean before ``auto``: true and false read as on and off."""
    if not isinstance(compute, dict):
        return compute
    if isinstance(compute.get("compile"), bool):
        compute = {**compute, "compile": "on" if compute["compile"] else "off"}
    if "shards" in compute:
        compute = {k: v for k, v in compute.items() if k != "shards"} | {
            "ranks": compute.get("ranks", compute["shards"])
        }
    if compute.get("ranks") == "auto":
        compute = {**compute, "ranks": 0}
    return compute
