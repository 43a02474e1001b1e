"""Where people see plugins: the experiment page (what it recorded, beside its spec, and why it
waits) and the Workers page (what each worker loaded), in HTML, JSON and the socket's event."""

import pytest

from orchestrator.experiments.models import Experiment
from orchestrator.fleet.workers import Worker
from orchestrator.live import events
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.plugins.conftest import HAS_IT, RECORDED

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


def _waiting_run(user) -> Experiment:
    Worker.objects.create(hostname="w1@h", queue="cpu")
    e = new_experiment(owner=user, name="needs a plugin", spec=TINY_SPEC)
    Experiment.objects.filter(pk=e.pk).update(plugins=RECORDED)
    e.refresh_from_db()
    e.start()
    return e


def test_the_experiment_page_shows_its_plugins_and_why_it_waits(alice_client, user, enqueued):
    e = _waiting_run(user)
    html = alice_client.get(f"/experiments/{e.pk}/").content.decode()
    table = html[html.index('id="spec-plugins"') :]
    for text in ("model:test_mlp", "fedweb_test_plugin", "1.2.0", "<code>abc</code>"):
        assert text in table
    assert "no worker has plugin fedweb_test_plugin 1.2.0" in html
    body = alice_client.get(f"/experiments/statuses.json?ids={e.pk}").json()
    assert body["experiments"][str(e.pk)]["waiting"]["reason"] == "no worker has plugin fedweb_test_plugin 1.2.0"
    assert events.status_event(e)["waiting"]["reason"] == "no worker has plugin fedweb_test_plugin 1.2.0"


def test_an_experiment_without_plugins_shows_no_plugin_table(alice_client, user, enqueued):
    e = new_experiment(owner=user, name="plain", spec=TINY_SPEC)
    assert 'id="spec-plugins"' not in alice_client.get(f"/experiments/{e.pk}/").content.decode()


def test_the_workers_page_lists_each_workers_plugins(alice_client):
    Worker.objects.create(hostname="w1@h", queue="cpu", plugins=HAS_IT)
    plain = Worker.objects.create(hostname="w2@h", queue="cpu")
    html = alice_client.get("/workers/").content.decode()
    row = html[html.index("<code>w1@h</code>") : html.index("<code>w2@h</code>")]
    assert "<code>fedweb_test_plugin</code> 1.2.0 · <code>abc</code>" in row
    assert 'title="model:test_mlp"' in row
    workers = {w["hostname"]: w for w in alice_client.get("/workers.json").json()["workers"]}
    assert workers["w1@h"]["plugins"] == HAS_IT and workers["w2@h"]["plugins"] == []
    assert events.worker_event(plain)["plugins"] == []
    assert events.worker_event(Worker.objects.get(hostname="w1@h"))["plugins"] == HAS_IT


def test_a_heartbeat_reports_the_plugins_the_worker_loaded(test_plugin):
    from workers import heartbeat

    worker = heartbeat.beat("w1@h", "cpu")
    [reported] = worker.plugins
    assert reported == {
        "name": "fedweb_test_plugin", "version": None, "hash": test_plugin[0]["hash"], "components": ["model:test_mlp"],
    }  # fmt: skip
    assert Worker.objects.get(hostname="w1@h").plugins == [reported]
