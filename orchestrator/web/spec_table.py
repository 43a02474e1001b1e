"""A run's spec as the dashboard shows it: hyperparameters grouped by section (data, model,
algorithm, ...), each with its help text, and the fields that differ from the defaults marked."""

from __future__ import annotations

import json

from fedweb_engine.spec import legacy as spec_legacy
from fedweb_engine.spec.schema import option_key, spec_fields
from orchestrator.experiments.specs import flatten

RUN_GROUP = "run"  # the top-level fields (seed, rounds)


def _shown(value) -> str:
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return "–" if value is None else str(value)


def spec_groups(spec: dict) -> list[dict]:
    """``[{"name", "rows": [{"field", "value", "default", "changed", "help"}]}]`` in form order;
    fields the spec holds that the engine no longer knows are listed last, under their section."""
    fields = spec_fields()
    upgraded = spec_legacy.upgrade(spec or {})  # a spec stored before components: today's names
    values = {option_key(name, upgraded): value for name, value in flatten(upgraded).items()}
    groups: dict[str, list[dict]] = {}
    for name in list(fields) + [k for k in values if k not in fields]:
        if name not in values:
            continue  # an older spec without a newer field, or another component's option
        meta = fields.get(name, {})
        group, _, field = name.rpartition(".")
        if meta.get("option"):  # model.options.vgg.width: the model's "width"
            group, field = name.rsplit(".options.", 1)[0], meta["option"]
        value, default = values[name], meta.get("default")
        changed = name not in fields or json.dumps(value, sort_keys=True) != json.dumps(default, sort_keys=True)
        row = {"field": field, "name": name, "value": _shown(value), "default": _shown(default), "changed": changed}
        groups.setdefault(group or RUN_GROUP, []).append({**row, "help": meta.get("help", "")})
    return [{"name": name, "rows": rows} for name, rows in groups.items()]
