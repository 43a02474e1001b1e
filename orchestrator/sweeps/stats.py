"""Runs grouped into configurations, with mean ± std over the runs of each (the seeds): the sweep
page's table and curves, and the compare page's grouping. Pure functions of specs and rounds."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from typing import Any

from fedweb_engine.spec.components import short_name
from fedweb_engine.spec.legacy import legacy_field
from orchestrator.experiments.specs import flatten, shown_spec
from orchestrator.experiments.summaries import METRICS, summarize
from orchestrator.sweeps.models import SEED_FIELD

# The table's metrics (``METRICS``) are the run summaries the round fields declare
# (fedweb_engine/results/round_fields.py, ``Summary``): each run is folded into them, then pooled over the runs.


def value_at(spec: dict, dotted: str) -> Any:
    """The value of a swept field in a stored spec dict; None where absent. The field may be named
    as the spec has it (``model.options.width``), as the form keys it (``model.options.vgg.width``)
    or by its old flat name (``model.width``, ``communication.topk_ratio``): sweeps accept all three."""
    for path in _paths(dotted):
        node: Any = spec
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return node
    return None


def _paths(dotted: str) -> list[str]:
    parts = dotted.split(".")
    paths = [dotted]
    if "options" in parts and len(parts) - parts.index("options") == 3:  # <path>.options.<component>.<option>
        i = parts.index("options")
        paths.append(".".join(parts[: i + 1] + parts[i + 2 :]))
    if dotted == "communication.topk_ratio":  # set the ratio of whichever link uses top-k
        paths += ["communication.uplink.options.ratio", "communication.downlink.options.ratio"]
    legacy = legacy_field(dotted)
    if legacy:
        paths.append(legacy)
    return paths


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (0 for a single value); (None, None) for none."""
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def differing_fields(specs: list[dict]) -> list[str]:
    """The dotted fields whose values are not all equal, the seed left out: what tells groups apart."""
    flat = [flatten(s) for s in specs]
    keys = sorted({k for f in flat for k in f})
    return [k for k in keys if k != SEED_FIELD and len({json.dumps(f.get(k), sort_keys=True) for f in flat}) > 1]


def _short(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


MAX_LABEL_FIELDS = 4  # past this many differing fields a label is no longer short: the run's name is


def run_labels(experiments: list) -> list[str]:
    """A short label per run made of the fields whose values differ (seed included), e.g.
    ``mu=0.1 seed=1``; each field by its last name unless two differing fields share it. Only
    fields every run has count: an external run's free-form config beside a native spec would
    otherwise list every field one of them lacks (``lr=null ...``). A run whose label would not
    tell it apart (identical specs), or would take more than ``MAX_LABEL_FIELDS`` fields, is
    labelled ``name #id``."""
    specs = [shown_spec(e) for e in experiments]
    flat = [flatten(s) for s in specs]
    fields = [f for f in differing_fields(specs) if all(run.get(f) is not None for run in flat)]
    if len({json.dumps(f.get(SEED_FIELD)) for f in flat}) > 1 and all(f.get(SEED_FIELD) is not None for f in flat):
        fields.append(SEED_FIELD)
    if len(fields) > MAX_LABEL_FIELDS:
        fields = []
    lasts = [short_name(f) for f in fields]
    names = [
        last if lasts.count(last) == 1 else ".".join(f.rsplit(".", 2)[-2:])
        for f, last in zip(fields, lasts, strict=True)
    ]
    labels = [" ".join(f"{n}={_short(f.get(k))}" for n, k in zip(names, fields, strict=True)) for f in flat]
    return [
        label if label and labels.count(label) == 1 else f"{e.name} #{e.pk}"
        for e, label in zip(experiments, labels, strict=True)
    ]


def in_statistics(experiment) -> bool:
    """Whether a run counts in mean ± std and the parallel coordinates: it completed. A run still
    going (or stopped early) would pool its round 6 with another's round 40 ("Rounds 6 ± 6")."""
    return experiment.status == "completed"


def group(experiments: list, rounds_by_id: dict[int, list[dict]], fields: list[str], value_of=None) -> list[dict]:
    """One row per configuration (the values of ``fields``; ``value_of(experiment, field)`` reads one,
    by default from the spec), in first-seen order: its runs, the seeds, how many finished, and
    mean ± std of every metric of ``METRICS`` over its completed runs (``counted`` of them: a row
    with fewer says so)."""
    buckets: dict[str, list] = defaultdict(list)
    configs: dict[str, dict] = {}
    for e in experiments:
        config = {f: value_of(e, f) if value_of else value_at(e.spec, f) for f in fields}
        key = json.dumps(config, sort_keys=True)
        configs.setdefault(key, config)
        buckets[key].append(e)
    rows = []
    for key, runs in buckets.items():
        config = configs[key]
        row = {
            "config": config,
            "label": " ".join(f"{short_name(f)}={json.dumps(v)}" for f, v in config.items()) or "all runs",
            "runs": runs,
            "seeds": [e.spec.get(SEED_FIELD) for e in runs],
            "finished": sum(1 for e in runs if e.is_finished),
            "counted": sum(1 for e in runs if in_statistics(e)),
        }
        summaries = [summarize(rounds_by_id.get(e.pk, [])) for e in runs if in_statistics(e)]
        for m in METRICS:
            row[m.key] = mean_std([s[m.key] for s in summaries if s[m.key] is not None])
        rows.append(row)
    return rows


def band(runs: list, rounds_by_id: dict[int, list[dict]], field: str) -> dict:
    """A configuration's curve: per round, the mean and std of ``field`` over the runs that have it."""
    per_round: dict[int, list[float]] = defaultdict(list)
    for e in runs:
        for r in rounds_by_id.get(e.pk, []):
            if r.get(field) is not None:
                per_round[r["round"]].append(float(r[field]))
    xs = sorted(per_round)
    stats = [mean_std(per_round[x]) for x in xs]
    return {"x": xs, "mean": [m for m, _ in stats], "std": [s for _, s in stats]}
