"""Creating a sweep: everything is checked first (every point of a grid or sample, or a search's
settings and TPE ranges, every bad field reported at once), then the sweep and its runs are stored
in one transaction (all or none), then queued. A search's configurations get a ``Trial`` each; a
TPE search creates its first ones here and the rest as they finish (``search``)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.db import transaction

from fedweb_engine.spec.schema import Spec, SpecError
from orchestrator.experiments.launch import create_experiment
from orchestrator.models import Sweep, Trial
from orchestrator.sweeps import search as searches
from orchestrator.sweeps.errors import SweepError
from orchestrator.sweeps.expand import check_axes, describe, expand, is_spec_field, range_errors
from orchestrator.sweeps.models import SEED_FIELD, STOPPING, SWEEP_MODES
from orchestrator.sweeps.search_options import SearchOptions, check_options

EVALUATED = ("test_", "client_", "personal_")  # round fields only evaluated rounds carry


def check(base: Any, axes: Any, *, mode: str, samples: int | None, sample_seed: int, stopping: str,
          search: Any, max_workers: Any) -> tuple[list, SearchOptions | None, dict]:  # fmt: skip
    """(runs, search options or None, axes) of a valid sweep, or one ``SweepError`` with every bad field."""
    errors: dict[str, list[str]] = {}
    if mode not in SWEEP_MODES:
        raise SweepError({"mode": [f"mode must be one of {', '.join(SWEEP_MODES)}, not {mode!r}"]})
    if stopping not in STOPPING:
        errors["stopping"] = [f"stopping must be one of {', '.join(STOPPING)}, not {stopping!r}"]
    if max_workers is not None and (
        not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 1
    ):
        errors["max_workers"] = ["max_workers must be a whole number >= 1 (or left out: no cap)"]
    options = None
    if stopping != "none" or mode == "tpe":
        try:
            options = check_options(mode=mode, stopping=stopping, options=search if search is not None else {},
                                    rounds=_rounds(base), is_field=is_spec_field)  # fmt: skip
        except SweepError as e:
            errors.update(e.errors)
        _check_evaluation(errors, base, stopping, options)
    runs: list = []
    try:
        if mode == "tpe":
            axes = _tpe_axes(axes)
            if options is not None and isinstance(base, dict):
                errors.update(range_errors(base, options.ranges, axes[SEED_FIELD][0]))
                _check_budget(errors, options, axes)
        else:
            runs = expand(base, axes, mode=mode, samples=samples, sample_seed=sample_seed)
            axes = check_axes(axes)
    except SweepError as e:
        errors.update(e.errors)
    if errors:
        raise SweepError(errors)
    return runs, options, axes


def _rounds(base: Any) -> int:
    try:
        return Spec.from_dict(base).rounds if isinstance(base, dict) else 1
    except SpecError:
        return 1_000_000  # the spec's own error is reported by the expansion


def _check_evaluation(errors: dict, base: Any, stopping: str, options: SearchOptions | None) -> None:
    if stopping == "none" or options is None or not options.target.startswith(EVALUATED):
        return
    try:
        every = Spec.from_dict(base).evaluation.every
    except (SpecError, TypeError, AttributeError):
        return
    if every > options.first_rung:
        errors.setdefault("first_rung", []).append(
            f"first_rung ({options.first_rung}) comes before the first evaluated round (evaluation.every = {every}): "
            f"{options.target} has no value there; choose a first_rung of at least {every}"
        )


def _tpe_axes(axes: Any) -> dict:
    """A TPE search's axes: only its seeds (its swept fields are ranges)."""
    axes = axes or {}
    if not isinstance(axes, dict) or set(axes) - {SEED_FIELD}:
        raise SweepError({"axes": ["in tpe mode the swept fields are ranges; axes may list only the seeds"]})
    seeds = axes.get(SEED_FIELD, [0])
    if not isinstance(seeds, list) or not seeds:
        raise SweepError({"seeds": ["seeds must be a non-empty list"]})
    return {SEED_FIELD: list({json.dumps(v, sort_keys=True): v for v in seeds}.values())}


def _check_budget(errors: dict, options: SearchOptions, axes: dict) -> None:
    runs = (options.budget or 0) * len(axes[SEED_FIELD])
    if runs > settings.FEDWEB_SWEEP_MAX_RUNS:
        errors.setdefault("budget", []).append(
            f"budget x seeds is {runs} runs, over the limit of {settings.FEDWEB_SWEEP_MAX_RUNS} (FEDWEB_SWEEP_MAX_RUNS)"
        )


def create_sweep(*, owner, base: Any, axes: Any, mode: str = "grid", samples: int | None = None,
                 sample_seed: int = 0, start: bool = True, stopping: str = "none", search: Any = None,
                 max_workers: int | None = None, **fields) -> Sweep:  # fmt: skip
    """Check everything, then store the sweep and all its runs in one transaction (all or none), then
    queue them when ``start``. ``fields``: name, description, tags, team, visibility."""
    runs, options, axes = check(base, axes, mode=mode, samples=samples, sample_seed=sample_seed, stopping=stopping,
                                search=search, max_workers=max_workers)  # fmt: skip
    shared = {k: fields[k] for k in ("team", "visibility") if k in fields}
    with transaction.atomic():
        sweep = Sweep.objects.create(
            owner=owner, base_spec=base, axes=axes, mode=mode, samples=samples, sample_seed=sample_seed,
            stopping=stopping, search=options.to_dict() if options else {}, max_workers=max_workers, **fields,
        )  # fmt: skip
        trials: dict[str, Trial] = {}
        experiments = []
        for point, spec in runs:
            config = {f: v for f, v in point.items() if f != SEED_FIELD}
            key = json.dumps(config, sort_keys=True)
            if sweep.is_search and key not in trials:
                trials[key] = Trial.objects.create(sweep=sweep, number=len(trials), params=config)
            experiments.append(create_experiment(
                owner=owner, spec=spec, start=False, sweep=sweep, trial=trials.get(key),
                name=f"{sweep.name} · {describe(point)}", description=sweep.description, tags=sweep.tags, **shared,
            ))  # fmt: skip
    if start:
        for experiment in experiments:
            experiment.start(by=owner.username)
        if mode == "tpe":
            searches.begin(sweep)
    return sweep
