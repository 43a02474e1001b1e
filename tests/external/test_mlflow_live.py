"""The real ``mlflow`` client (mlflow-skinny) against a live daphne: ``set_experiment`` /
``start_run`` / ``log_param`` / ``log_metric(s)`` / ``end_run`` make a FedWeb external run with
rounds, custom metrics and its config; reads come back in MLflow's shapes; what FedWeb does not
serve answers MLflow's errors."""

from __future__ import annotations

import os

import pytest
import requests
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric

mlflow = pytest.importorskip("mlflow")
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tracking(daphne, monkeypatch):
    """mlflow pointed at the live FedWeb, with dave's API token as MLFLOW_TRACKING_TOKEN."""
    user = get_user_model().objects.create_user("dave", password="pw")
    token = Token.objects.create(user=user).key
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # a refusal fails the test at once
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    mlflow.set_tracking_uri(f"http://{daphne}")
    yield user
    if mlflow.active_run():
        mlflow.end_run()


def test_an_mlflow_script_makes_an_external_run(tracking):
    mlflow.set_experiment("fl-mnist")
    with mlflow.start_run(run_name="fedavg via mlflow") as active:
        mlflow.log_param("lr", 0.05)
        mlflow.log_params({"clients": 20, "strategy": "fedavg"})
        for r in range(1, 6):
            mlflow.log_metric("loss", 1.0 / r, step=r)
            mlflow.log_metric("accuracy", r / 10, step=r)
            mlflow.log_metrics({"bytes_up": 1000 * r, "grad/norm": 0.5 * r}, step=r)
        mlflow.log_metric("final_f1", 0.9)  # step 0: a run-level value, no round
        run_id = active.info.run_id
    experiment = Experiment.objects.get(pk=int(run_id))
    assert (experiment.kind, experiment.status, experiment.name) == (
        Kind.EXTERNAL,
        Status.COMPLETED,
        "fedavg via mlflow",
    )
    assert experiment.spec == {"lr": "0.05", "clients": "20", "strategy": "fedavg"}
    rows = RoundMetric.objects.filter(experiment=experiment).order_by("round")
    assert [(m.round, m.train_loss, m.test_accuracy, m.bytes_up) for m in rows] == [
        (r, 1.0 / r, r / 10, 1000 * r) for r in range(1, 6)
    ]
    custom = dict(CustomMetric.objects.filter(experiment=experiment).values_list("round", "values"))
    assert custom == {r: {"grad/norm": 0.5 * r} for r in range(1, 6)}

    client = MlflowClient()
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["clients"] == "20"
    assert run.data.metrics["loss"] == pytest.approx(0.2) and run.data.metrics["final_f1"] == pytest.approx(0.9)
    history = client.get_metric_history(run_id, "accuracy")
    assert [(m.step, m.value) for m in history] == [(r, r / 10) for r in range(1, 6)]
    assert client.get_experiment_by_name("fl-mnist").experiment_id == run.info.experiment_id
    assert client.get_experiment_by_name("no such experiment") is None


def test_the_last_round_shows_as_soon_as_the_next_step_or_the_end_comes(tracking):
    mlflow.set_experiment("pending")
    run = mlflow.start_run()
    pk = int(run.info.run_id)
    mlflow.log_metric("loss", 0.5, step=1)
    mlflow.log_metric("accuracy", 0.6, step=1)
    assert not RoundMetric.objects.filter(experiment_id=pk).exists()  # round 1 may still get metrics
    assert MlflowClient().get_run(run.info.run_id).data.metrics["accuracy"] == pytest.approx(0.6)
    mlflow.log_metric("loss", 0.4, step=2)
    assert list(RoundMetric.objects.filter(experiment_id=pk).values_list("round", "train_loss", "test_accuracy")) == [
        (1, 0.5, 0.6)
    ]
    mlflow.end_run(status="FAILED")
    assert list(RoundMetric.objects.filter(experiment_id=pk).values_list("round", flat=True)) == [1, 2]
    assert Experiment.objects.get(pk=pk).status == Status.FAILED


def test_refusals_are_mlflow_errors_and_store_nothing(tracking):
    mlflow.set_experiment("refusals")
    with mlflow.start_run() as active:
        pk = int(active.info.run_id)
        mlflow.log_metric("loss", 0.5, step=3)
        mlflow.log_metric("loss", 0.4, step=4)
        with pytest.raises(MlflowException) as bad:
            mlflow.log_metric("loss", 0.9, step=2)  # backwards
        assert bad.value.error_code == "INVALID_PARAMETER_VALUE" and "backwards" in str(bad.value)
        with pytest.raises(MlflowException) as bad:
            mlflow.log_metric("loss", float("nan"), step=5)
        assert bad.value.error_code == "INVALID_PARAMETER_VALUE" and "finite" in str(bad.value)
        with pytest.raises(MlflowException) as bad:
            mlflow.log_param("lr", 1)
            mlflow.log_param("lr", 2)  # MLflow's rule: a param is logged once
        assert bad.value.error_code == "INVALID_PARAMETER_VALUE"
        with pytest.raises(requests.HTTPError) as bad:  # mlflow's artifact upload raises requests' error
            mlflow.log_text("hello", "notes.txt")  # artifacts are not served
        assert bad.value.response.status_code == 404 and "not supported" in bad.value.response.json()["message"]
    assert list(RoundMetric.objects.filter(experiment_id=pk).values_list("round", "train_loss")) == [(3, 0.5), (4, 0.4)]
    with pytest.raises(MlflowException) as bad:
        MlflowClient().create_experiment("refusals")
    assert bad.value.error_code == "RESOURCE_ALREADY_EXISTS"


def test_without_a_valid_token_nothing_is_created(tracking, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "not-a-token")
    with pytest.raises(MlflowException) as bad:
        mlflow.set_experiment("nope")
    assert bad.value.error_code == "UNAUTHENTICATED"
    os.environ.pop("MLFLOW_TRACKING_TOKEN")
    with pytest.raises(MlflowException) as bad:
        MlflowClient().create_experiment("nope")
    assert bad.value.error_code == "UNAUTHENTICATED"
    assert not Experiment.objects.exists()
