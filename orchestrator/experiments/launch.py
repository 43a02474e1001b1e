"""Creating an experiment: the one way a native run is stored and queued. The New experiment form,
the API, sweeps and the ``run_experiment`` and ``demo`` commands all call ``create_experiment``.

It is where a new spec is checked: parsed against today's bounds and held to this server's limits
(``checked_spec``). A refused spec raises ``SpecError`` naming the field, before anything is
stored, and each caller shows it beside its own input. The model stores what it is given and
checks nothing; a stored spec is never judged again (the worker parses it as stored). The New
experiment page's side panel checks a spec too (``checked_spec``), to preview it: it stores nothing.
"""

from __future__ import annotations

from fedweb_engine.spec.schema import Spec
from orchestrator.experiments.limits import check_new_spec
from orchestrator.experiments.models import Experiment


def checked_spec(data) -> Spec:
    """``data`` parsed and checked against today's bounds and this server's limits, or ``SpecError``
    naming the field."""
    spec = Spec.from_dict(data)
    check_new_spec(spec)
    return spec


def create_experiment(*, owner, spec: dict | Spec, start: bool = True, by: str = "", **fields) -> Experiment:
    """Check ``spec`` (a spec dict, in any shape the API accepts), store a new experiment of it and,
    with ``start``, queue it; ``SpecError`` naming the field, and nothing stored, when the spec is
    refused. A ``Spec`` is one ``checked_spec`` returned (a sweep checks every point before it stores
    any): it is not checked twice. ``fields``: name, description, tags, team, visibility, sweep, trial."""
    checked = spec if isinstance(spec, Spec) else checked_spec(spec)
    experiment = Experiment.for_spec(checked, owner=owner, **fields)
    experiment.save(force_insert=True)
    if start:
        experiment.start(by=by or owner.username)
    return experiment
