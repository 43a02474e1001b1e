import csv
import io
import json
import re

import pytest

from orchestrator.experiments.models import Experiment
from orchestrator.fleet.workers import Worker
from orchestrator.web.views.compare import spec_differences
from tests.factories import round_result
from tests.web.conftest import make_experiment
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db


def test_it_requires_login_everywhere(client, user):
    experiment = make_experiment(user, rounds=2)
    for url in ["/", "/experiments/new/", f"/experiments/{experiment.pk}/", f"/experiments/{experiment.pk}/rounds.csv",
                f"/experiments/{experiment.pk}/report.html", "/compare/?ids=1,2", "/workers/", "/workers.json"]:  # fmt: skip
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url


def test_it_lists_filters_and_searches(alice_client, user, other_user):
    make_experiment(user, name="alpha run", tags=["baseline"], description="first try")
    make_experiment(user, name="beta run", tags=["fedprox"], status="completed")
    make_experiment(other_user, name="not mine")
    names = lambda r: [row["run"].name for row in r.context["rows"]]  # noqa: E731
    assert sorted(names(alice_client.get("/"))) == ["alpha run", "beta run"]
    assert names(alice_client.get("/?status=completed")) == ["beta run"]  # an older link's filters
    assert names(alice_client.get("/?tag=baseline")) == ["alpha run"]
    assert names(alice_client.get("/?q=status = completed")) == ["beta run"]
    assert names(alice_client.get("/?q=tag:baseline")) == ["alpha run"]
    assert names(alice_client.get("/?q=first")) == ["alpha run"]
    assert sorted(names(alice_client.get("/?scope=mine"))) == ["alpha run", "beta run"]
    assert names(alice_client.get("/?scope=shared")) == []
    assert names(alice_client.get("/?scope=team")) == []


def test_it_reports_statuses_as_json_for_visible_experiments_only(alice_client, user, other_user):
    mine, theirs = make_experiment(user, rounds=3), make_experiment(other_user)
    body = alice_client.get(f"/experiments/statuses.json?ids={mine.pk},{theirs.pk}").json()
    assert list(body["experiments"]) == [str(mine.pk)]
    assert body["experiments"][str(mine.pk)] == {
        "status": "draft", "current_round": 3, "total_rounds": 5, "worker": "", "started": None, "finished": None,
        "waiting": None,
    }  # fmt: skip


def test_it_renders_the_history_into_the_dashboard(alice_client, user):
    experiment = make_experiment(user, rounds=3)
    experiment.log("info", "hello from the log")
    response = alice_client.get(f"/experiments/{experiment.pk}/")
    html = response.content.decode()
    charts = _script_json(html, "charts-data")
    loss = charts["figures"]["chart-loss"]["data"]
    assert [t["name"] for t in loss] == ["train loss", "test loss"] and loss[0]["x"] == [1, 2, 3]
    assert loss[0]["y"] == [round_result(n)["train_loss"] for n in (1, 2, 3)]
    page = json.loads(re.search(r'<script id="page-data" type="application/json">(.*?)</script>', html).group(1))
    assert page["ws_url"] == f"/ws/experiments/{experiment.pk}/" and page["total_rounds"] == 5
    assert "hello from the log" in html and "&quot;seed&quot;: 3" in html  # event log and pretty spec
    for chart in ("chart-loss", "chart-accuracy", "chart-memory", "chart-bandwidth", "chart-time"):
        assert f'id="{chart}"' in html
    assert "/static/vendor/plotly.min.js" in html and "cdn" not in html.lower()
    assert 'id="btn-pause"' in html  # the owner gets the controls


def test_it_hides_controls_from_viewers_without_control_rights(client, user, django_user_model):
    from accounts.models import Membership, Team

    viewer = django_user_model.objects.create_user("viewer", password="pw")  # may view, not control
    team = Team.objects.create(name="lab")
    Membership.objects.create(team=team, user=user, role="owner")
    Membership.objects.create(team=team, user=viewer, role="viewer")
    experiment = make_experiment(user, rounds=1)
    experiment.team, experiment.visibility = team, "team"
    experiment.save()
    client.force_login(viewer)
    html = client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert 'id="btn-pause"' not in html and 'id="btn-delete"' not in html
    assert client.post(f"/experiments/{experiment.pk}/cancel/").status_code == 403


def test_it_gives_404_for_experiments_of_others(alice_client, other_user):
    theirs = make_experiment(other_user, rounds=1)
    for suffix in ("", "rounds.csv", "rounds.json", "report.html"):
        assert alice_client.get(f"/experiments/{theirs.pk}/{suffix}").status_code == 404
    assert alice_client.post(f"/experiments/{theirs.pk}/pause/").status_code == 404


def test_it_downloads_rounds_as_csv_and_json(alice_client, user):
    experiment = make_experiment(user, rounds=3)
    response = alice_client.get(f"/experiments/{experiment.pk}/rounds.csv")
    assert response["Content-Type"] == "text/csv; charset=utf-8" and "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [int(r["round"]) for r in rows] == [1, 2, 3] and float(rows[1]["test_accuracy"]) == 0.2
    body = alice_client.get(f"/experiments/{experiment.pk}/rounds.json").json()
    assert (
        body["id"] == experiment.pk
        and body["rounds"][2] == {**round_result(3), "worker": ""}
        and body["spec"]["rounds"] == 5
    )


def test_it_builds_a_self_contained_report(alice_client, user):
    experiment = make_experiment(user, rounds=4)
    html = alice_client.get(f"/experiments/{experiment.pk}/report.html").content.decode()
    outside_scripts = re.sub(r"<script\b[^>]*>.*?</script>", "", html, flags=re.S)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", outside_scripts)
    assert not re.search(r"<script[^>]+src=", html) and not re.search(r"<link[^>]+stylesheet", html)
    assert "plotly.js v" in html and "FedWebDashboard" in html  # plotly and the chart code inline
    accuracy = _script_json(html, "charts-data")["figures"]["chart-accuracy"]["data"]
    assert accuracy[0]["x"] == [1, 2, 3, 4]  # the dashboard's figures, drawn by the same inlined script
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert len(scripts) == 3 and all("</" not in s for s in scripts)  # plotly, charts.js, the page: none closes early


def test_it_puts_every_declared_summary_column_and_chart_in_the_report(user):
    from fedweb_engine.results import round_fields
    from orchestrator.experiments.records import RoundMetric
    from orchestrator.web.report import render_report

    # Every optional number filled, so every chart that some field plots on has data to draw.
    filled = {f.name: 0.5 for f in round_fields.FIELDS if f.null and f.type is float}
    filled |= {f.name: 2 for f in round_fields.FIELDS if f.null and f.type is int}  # the ranks' columns too
    experiment = make_experiment(user, spec={"rounds": 2})
    for n in (1, 2):
        RoundMetric.record(experiment, round_result(n, **filled))
    html = render_report(experiment)
    for _, summary in round_fields.summaries():
        assert f'data-col="{summary.key}">{summary.title}<b>' in html, summary.key
    for _, column in round_fields.columns():
        assert f">{column.label}<" in html, column.label
    figures = _script_json(html, "charts-data")["figures"]
    assert {f"chart-{c.id}" for c in round_fields.charts()} <= set(figures)


def test_it_warns_of_a_leak_in_the_report(user):
    from orchestrator.experiments.records import RoundMetric
    from orchestrator.web.report import render_report

    experiment = make_experiment(user, spec={"rounds": 20})
    for n in range(1, 21):
        RoundMetric.record(experiment, round_result(n, rss_mb=400.0 + 20 * n))
    assert "Host RSS grows 20.0 MB per round" in render_report(experiment)


def test_it_compares_experiments_and_lists_differing_fields(alice_client, user, other_user):
    a = make_experiment(user, rounds=2, name="a", spec={"rounds": 5, "data": {"alpha": 0.1}})
    b = make_experiment(user, rounds=3, name="b", spec={"rounds": 5, "data": {"alpha": 0.9}, "local": {"lr": 0.1}})
    response = alice_client.get(f"/compare/?ids={a.pk},{b.pk}")
    assert dict(response.context["differences"]) == {"data.alpha": [0.1, 0.9], "local.lr": [0.05, 0.1]}
    html = response.content.decode()
    assert "<code>data.alpha</code>" in html
    accuracy = _script_json(html, "charts-data")["figures"]["cmp-accuracy"]["data"]
    # The shorter run is drawn last, on top of the longer one; each is named by the fields that differ.
    assert [(t["name"], t["x"]) for t in accuracy] == [("alpha=0.9 lr=0.1", [1, 2, 3]), ("alpha=0.1 lr=0.05", [1, 2])]
    series = response.context["series"]
    assert [len(s["rounds"]) for s in series] == [2, 3]
    theirs = make_experiment(other_user)
    assert alice_client.get(f"/compare/?ids={a.pk},{theirs.pk}").status_code == 404


def test_it_flattens_nested_specs_for_the_difference_table():
    rows = spec_differences([{"a": {"b": 1, "c": [1, 2]}, "d": 0}, {"a": {"b": 1, "c": [1, 3]}, "d": 0}])
    assert rows == [("a.c", [[1, 2], [1, 3]])]


def test_it_needs_post_for_controls(alice_client, user):
    experiment = make_experiment(user, rounds=1)
    for action in ("pause", "resume", "cancel", "delete"):
        assert alice_client.get(f"/experiments/{experiment.pk}/{action}/").status_code == 405


def test_it_pauses_resumes_and_cancels(alice_client, user, enqueued):
    experiment = make_experiment(user)
    experiment.start()
    assert alice_client.post(f"/experiments/{experiment.pk}/pause/").status_code == 302
    assert Experiment.objects.get().status == "paused"
    alice_client.post(f"/experiments/{experiment.pk}/resume/")
    assert Experiment.objects.get().status == "queued"
    asked = alice_client.post(f"/experiments/{experiment.pk}/cancel/")  # cannot be undone: the page asks first
    assert asked.status_code == 200 and b"Yes, cancel it" in asked.content and b"Keep it running" in asked.content
    assert Experiment.objects.get().status == "queued"
    alice_client.post(f"/experiments/{experiment.pk}/cancel/", {"confirm": "yes"})
    assert Experiment.objects.get().status == "cancelled"
    response = alice_client.post(f"/experiments/{experiment.pk}/pause/", follow=True)
    assert "Could not pause an experiment that is cancelled" in response.content.decode()


def test_it_deletes_only_after_confirmation(alice_client, user, other_user):
    experiment = make_experiment(user, rounds=2)
    response = alice_client.post(f"/experiments/{experiment.pk}/delete/")
    assert response.status_code == 200 and b"Yes, delete it" in response.content
    assert Experiment.objects.filter(pk=experiment.pk).exists()
    response = alice_client.post(f"/experiments/{experiment.pk}/delete/", {"confirm": "yes"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert not Experiment.objects.filter(pk=experiment.pk).exists()


def test_it_previews_the_bandwidth_of_the_form_values(alice_client):
    query = form_data(model__name="mlp", model__options__mlp__hidden="32", data__options__digits__image_size="8", rounds="10",
                      participation__clients_per_round="5", communication__uplink__name="int8")  # fmt: skip
    body = alice_client.get("/experiments/new/bandwidth.json", query).json()
    from fedweb_engine.models import build_model, count_params
    from fedweb_engine.spec.schema import Spec

    params = count_params(
        build_model(Spec.from_dict({"model": {"name": "mlp", "options": {"hidden": 32}}}).model, (1, 8, 8), 10)
    )  # the engine's own count
    assert body["params"] == params and body["client_rounds"] == 50
    assert body["formula_total"] == 8 * params * 50
    assert body["down_per_client"] == 16 + 4 * params  # fp32 payload: header + data
    assert body["up_per_client"] < body["down_per_client"] / 3  # int8
    assert body["total"] == (body["down_per_client"] + body["up_per_client"]) * 50


def test_it_previews_a_client_algorithms_extras_apart_from_the_model_and_its_codec(alice_client):
    query = form_data(model__name="logistic", data__options__digits__image_size="8", rounds="10",
                      participation__clients_per_round="5", communication__uplink__name="fp16",
                      communication__downlink__name="fp16", algorithm__client__name="scaffold")  # fmt: skip
    body = alice_client.get("/experiments/new/bandwidth.json", query).json()
    # P = 650: fp16 model and update (16 + 2·650), SCAFFOLD's c and Δc_i in fp32 (16 + 4·650) beside them.
    assert (body["model_down_per_client"], body["model_up_per_client"]) == (1316, 1316)
    assert (body["extra_down_per_client"], body["extra_up_per_client"]) == (2616, 2616)
    assert body["up_per_client"] == 1316 + 2616 and body["total"] == 2 * (1316 + 2616) * 50
    assert body["client_algorithm"] == "scaffold"


def test_it_names_the_field_when_a_preview_input_is_invalid(alice_client):
    response = alice_client.get("/experiments/new/bandwidth.json", form_data(data__alpha="abc"))
    assert response.status_code == 400
    assert response.json()["errors"] == {"data.alpha": ["data.alpha must be a number"]}
    response = alice_client.get("/experiments/new/privacy.json", form_data(rounds="0"))
    assert response.status_code == 400 and "rounds" in response.json()["errors"]


def test_it_answers_each_side_panel_box_from_the_fields_it_reads(alice_client):
    """ "rounds must be >= 1" belongs to the boxes that read rounds, not to the partition or resources;
    bandwidth still gives its per-client figures and says its whole-run totals need the rounds."""
    query = form_data(rounds="0", data__options__digits__image_size="8")
    privacy = alice_client.get("/experiments/new/privacy.json", query)
    assert privacy.status_code == 400 and privacy.json()["why"] == "rounds must be >= 1"
    for box in ("partition", "resources"):
        answer = alice_client.get(f"/experiments/new/{box}.json", query)
        assert answer.status_code == 200 and "rounds" not in answer.content.decode(), box
    bandwidth = alice_client.get("/experiments/new/bandwidth.json", query)
    assert bandwidth.status_code == 200 and bandwidth.json()["unknown"] == {"rounds": ["rounds must be >= 1"]}
    assert bandwidth.json()["down_per_client"] > 0
    # A box's own field still stops it, and it says why.
    alpha = alice_client.get("/experiments/new/partition.json", form_data(data__alpha="abc"))
    assert alpha.status_code == 400 and alpha.json()["why"] == "data.alpha must be a number"
    assert alice_client.get("/experiments/new/privacy.json", form_data(data__alpha="abc")).status_code == 400
    assert alice_client.get("/experiments/new/privacy.json", form_data(local__lr="abc")).status_code == 400
    assert alice_client.get("/experiments/new/partition.json", form_data(local__lr="abc")).status_code == 200


def test_it_previews_the_partition_as_label_counts(alice_client):
    query = form_data(data__num_clients="80", data__alpha="0.3", data__options__digits__image_size="8")
    body = alice_client.get("/experiments/new/partition.json", query).json()
    assert body["num_clients"] == 80 and body["num_classes"] == 10
    assert len(body["label_counts"]) == 50 and len(body["samples"]) == 50  # capped at 50 clients
    assert [sum(c) for c in body["label_counts"]] == body["samples"]


def test_it_does_not_preview_partitions_that_need_files_or_too_much_work_and_says_why(alice_client):
    response = alice_client.get(
        "/experiments/new/partition.json", form_data(data__name="cifar10", data__options__cifar10__path="x")
    )
    assert response.status_code == 200
    body = response.json()
    assert body["previewed"] is False
    assert body["reason"] == "cifar10 is read from files; its partition is not previewed"
    big = form_data(data__name="synthetic_images", data__partition="natural", data__num_clients="3400",
                    model__name="logistic")  # fmt: skip
    response = alice_client.get("/experiments/new/partition.json", big)
    assert response.status_code == 200 and "too large to preview" in response.json()["reason"]


def test_it_lists_workers_with_their_gpus(alice_client, user, other_user):
    secret = make_experiment(other_user, name="secret")
    Worker.objects.create(hostname="gpu0@box", queue="gpu", current_experiment=secret,
                          devices=[{"index": 0, "name": "H100", "total_mb": 81559, "used_mb": 1200}])  # fmt: skip
    html = alice_client.get("/workers/").content.decode()
    assert "gpu0@box" in html and "H100 · 1200 / 81559 MB" in html and "secret" not in html
    body = alice_client.get("/workers.json").json()
    assert body["workers"][0]["busy"] and body["workers"][0]["current_experiment"] is None
    assert body["workers"][0]["lost"] is False


def _script_json(html: str, element_id: str):
    return json.loads(re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', html).group(1))
