"""Create-then-start is one domain function (``orchestrator.experiments.launch.create_experiment``):
the page, the API, sweeps and the commands hand it the spec as submitted, and it is where a new
spec is parsed and checked, once; the model stores what it is given and checks nothing. The local
learning rate's walk from the form to the step is the one docs/development.md documents ("Where things go"): these files, in
this order, never a call back up a layer."""

import ast
import inspect
from collections import Counter
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from fedweb_engine.spec.schema import LocalSpec, Spec, SpecError
from fedweb_engine.training.client import sgd_update_
from orchestrator.experiments import launch
from orchestrator.experiments.models import Experiment, Status
from orchestrator.sweeps.create import create_sweep
from tests.accounts.world import make_world
from tests.conftest import TINY_SPEC
from tests.experiments.rate_walk import ROOT, RateWalk
from tests.test_layers import LAYER_NAMES, layer_of
from tests.web.test_forms import form_data
from workers import runtime
from workers.rounds import execute_round

pytestmark = pytest.mark.django_db


@pytest.fixture
def counted(monkeypatch):
    """How often a spec is parsed (from a dict or as stored) and checked against the limits."""
    calls: Counter = Counter()
    for name in ("from_dict", "from_stored"):
        original = getattr(Spec, name).__func__

        def counting(cls, *args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(cls, *args, **kwargs)

        monkeypatch.setattr(Spec, name, classmethod(counting))
    check = launch.check_new_spec

    def counting_check(spec):
        calls["check_new_spec"] += 1
        return check(spec)

    monkeypatch.setattr(launch, "check_new_spec", counting_check)
    return calls


def test_the_page_parses_and_checks_a_new_spec_once(client, user, enqueued, counted):
    client.force_login(user)
    data = form_data(rounds="4")  # the test's own form filling parses a spec: not counted
    counted.clear()
    response = client.post("/experiments/new/", data)
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and experiment.status == Status.QUEUED and experiment.total_rounds == 4
    assert counted == Counter(from_dict=1, check_new_spec=1)
    assert len(enqueued) == 1


def test_the_api_parses_and_checks_a_new_spec_once(counted, enqueued):
    world = make_world()
    counted.clear()  # the world's own experiments are not counted
    client = APIClient()
    client.force_authenticate(world.owner)
    response = client.post("/api/experiments/", {"name": "n", "spec": TINY_SPEC, "start": True}, format="json")
    assert response.status_code == 201, response.json()
    assert Experiment.objects.get(pk=response.json()["id"]).status == Status.QUEUED
    assert counted == Counter(from_dict=1, check_new_spec=1)


def test_a_sweep_parses_and_checks_each_run_once(counted, enqueued):
    world = make_world()
    counted.clear()  # the world's own experiments are not counted
    sweep = create_sweep(owner=world.owner, base=TINY_SPEC, axes={"seed": [0, 1, 2]}, name="s")
    assert sweep.experiments.count() == 3 and len(enqueued) == 3
    assert counted == Counter(from_dict=3, check_new_spec=3)


def test_it_stores_the_spec_with_its_defaults_its_rounds_and_the_plugins_it_uses(user):
    experiment = launch.create_experiment(owner=user, name="x", spec={"rounds": 3}, start=False)
    stored = Experiment.objects.get(pk=experiment.pk)
    assert stored.spec == Spec.from_dict({"rounds": 3}).to_dict()  # what is stored is exactly what runs
    assert stored.total_rounds == 3 and stored.plugins == [] and stored.status == Status.DRAFT


def test_a_refused_spec_names_its_field_and_stores_nothing(user, enqueued, settings):
    settings.FEDWEB_MAX_CLIENTS = 10
    for spec, field in (({"rounds": 0}, "rounds"), (TINY_SPEC, "data.num_clients"), ([1, 2], "spec")):
        with pytest.raises(SpecError) as refused:
            launch.create_experiment(owner=user, name="x", spec=spec)
        assert refused.value.field == field, refused.value
    assert not Experiment.objects.exists() and enqueued == []


def test_saving_an_experiment_checks_and_changes_nothing_in_its_spec(user):
    # A stored spec that today's bounds refuse, in an old shape: a rename stores it as it was.
    experiment = launch.create_experiment(owner=user, name="old", spec=TINY_SPEC, start=False)
    old = {"rounds": 10**6, "model": {"name": "mlp", "hidden": 10**9}, "local": {"lr": 1e308}}
    Experiment.objects.filter(pk=experiment.pk).update(spec=old, total_rounds=7)
    experiment.refresh_from_db()
    experiment.name = "renamed"
    experiment.save()
    stored = Experiment.objects.get(pk=experiment.pk)
    assert stored.name == "renamed" and stored.spec == old and stored.total_rounds == 7
    bare = Experiment(owner=user, name="bare", spec={"rounds": -1})
    bare.save()  # only create_experiment judges a new spec
    assert Experiment.objects.get(pk=bare.pk).spec == {"rounds": -1}


def test_only_create_experiment_makes_a_native_experiment_in_the_app():
    # Every other construction of an Experiment is an external run's (its spec is a script's config).
    made = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        if path.parts[len(ROOT.parts)] not in ("orchestrator", "accounts", "workers", "fedweb"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _makes_experiment(node.func):
                external = any(k.arg == "kind" and "EXTERNAL" in ast.unparse(k.value) for k in node.keywords)
                if not external:
                    made.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert made == ["orchestrator/experiments/launch.py:" + str(_line_of_for_spec())], made


def _makes_experiment(func: ast.expr) -> bool:
    text = ast.unparse(func)
    return text in ("Experiment", "Experiment.objects.create", "Experiment.for_spec")


def _line_of_for_spec() -> int:
    source, start = inspect.getsourcelines(launch.create_experiment)
    return start + next(i for i, line in enumerate(source) if "Experiment.for_spec(" in line)


def test_a_worker_parses_the_spec_once_per_round_and_trains_with_the_form_s_learning_rate(
    client, user, enqueued, counted, empty_round_cache
):
    # The local learning rate's walk (docs/development.md, "Where things go"): the form's input, through
    # create-then-start and the round task, is the rate the engine's trainers step with.
    client.force_login(user)
    data = form_data(rounds="2", local__lr="0.0123", data__num_clients="20", participation__clients_per_round="4")
    counted.clear()  # the test's own form filling parses a spec: not counted
    assert client.post("/experiments/new/", data).status_code == 302
    experiment = Experiment.objects.get()
    assert counted == Counter(from_dict=1, check_new_spec=1)  # the web process: the form's, carried on
    for round_number in (1, 2):
        counted.clear()
        runtime._cache.clear()  # each round as a fresh worker process takes it (round 2 loads round 1's state)
        execute_round(experiment.pk, round_number, worker=f"w{round_number}", dispatch=False)
        # The worker: once, as stored (from_stored is from_dict without today's bounds).
        assert counted == Counter(from_stored=1, from_dict=1), round_number
        if round_number == 1:  # the last round's simulation is let go
            trainers = [replica.trainer for replica in runtime._cache[experiment.pk].sim.replicas]
            assert trainers and all(t.local.lr == 0.0123 for t in trainers)
    assert Experiment.objects.get().current_round == 2


RATE = 0.0123  # a rate no default or preset has: only the form's input carries it
FORM = "orchestrator/web/forms/experiment_forms.py"
README_WALK_START = "The local learning rate, from the New experiment form"


def _file_of(obj) -> str:
    return str(Path(inspect.getsourcefile(obj)).relative_to(ROOT))


def _readme_walk() -> list[str]:
    """The files of the documented walk (docs/development.md), in its order (the first word of each
    line of its block)."""
    text = (ROOT / "docs" / "development.md").read_text()
    block = text[text.index(README_WALK_START) :].split("```")[1]
    return [line.split()[0] for line in block.strip().splitlines()]


def _layer(file: str) -> int:
    return layer_of(file.removesuffix(".py").replace("/", "."))


def test_the_form_s_learning_rate_walks_down_through_the_readme_s_files_to_the_step(
    client, user, enqueued, empty_round_cache
):
    client.force_login(user)
    data = form_data(rounds="2", local__lr=str(RATE), data__num_clients="20", participation__clients_per_round="4")
    web, worker = RateWalk(RATE), RateWalk(RATE)
    with web.following():
        assert client.post("/experiments/new/", data).status_code == 302
    experiment = Experiment.objects.get()
    with worker.following():
        execute_round(experiment.pk, 1, worker="w1", dispatch=False)
    trainers = [replica.trainer for replica in runtime._cache[experiment.pk].sim.replicas]
    assert trainers and all(t.local.lr == RATE for t in trainers)  # what sgd_update_ steps with

    store, step = _file_of(Experiment), _file_of(sgd_update_)
    to_store, to_step = web.files_between(FORM, store), worker.files_between(store, step)
    assert to_store[0] == FORM and to_store[-1] == store, to_store  # the web process: form to stored row
    assert to_step[0] == store and to_step[-1] == step, to_step  # the worker: stored row to the step
    walk = list(dict.fromkeys([*to_store, _file_of(LocalSpec), *to_step]))
    assert walk == _readme_walk()
    assert len(walk) <= 8
    # No file outside the walk hands the rate on towards the step (a view passing form.spec would).
    feeders = [
        f
        for trace, end in ((web, store), (worker, step))
        for f in trace.order
        if f not in walk and trace.files_between(f, end)
    ]
    assert feeders == []
    climbs = [
        f"{a} ({LAYER_NAMES[_layer(a)]}) hands the rate to {b} ({LAYER_NAMES[_layer(b)]})"
        for edges in (web.calls, worker.calls)
        for a, callees in edges.items()
        for b in callees
        if _layer(b) > _layer(a)
    ]
    assert climbs == []
