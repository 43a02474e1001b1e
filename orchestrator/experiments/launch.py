"""Creating an experiment: the one way a new run is stored and queued (the page, the API, sweeps).

Its spec is parsed and checked once, where the input is validated (``checked_spec``: the form's
``clean``, the serializer's ``validate_spec``, a sweep's ``expand``), so an error names the input's
field there. The parsed ``Spec`` is carried on to ``create_experiment``, which stores it and queues
it without parsing or checking it again; the worker parses the stored spec once more, in its process.
"""

from __future__ import annotations

from fedweb_engine.spec.schema import Spec
from orchestrator.experiments.limits import check_new_spec
from orchestrator.models import Experiment


def checked_spec(data) -> Spec:
    """``data`` parsed and checked against today's bounds and this server's limits, or ``SpecError``
    naming the field."""
    spec = Spec.from_dict(data)
    check_new_spec(spec)
    return spec


def create_experiment(*, owner, spec: Spec, start: bool = True, by: str = "", **fields) -> Experiment:
    """Store a new experiment of ``spec`` (from ``checked_spec``) and, with ``start``, queue it.
    ``fields``: name, description, tags, team, visibility, sweep."""
    experiment = Experiment(owner=owner, **fields)
    experiment.use_checked_spec(spec)
    experiment.save(force_insert=True)
    if start:
        experiment.start(by=by or owner.username)
    return experiment
