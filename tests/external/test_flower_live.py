"""A real Flower run (flwr's ServerApp, its Message-API ``FedAvg`` and ClientApps training a small
numpy model) wrapped in ``FedWebStrategy``, against a live daphne: FedWeb gets every round with the
aggregated train/evaluate metrics, the replies, the array bytes measured from the messages and the
round time."""

from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric
from tests.external.conftest import CLIENT_SRC  # noqa: F401  (puts clients/python on sys.path)

# isort: split
# No importorskip: flwr is in requirements-dev.lock, so a venv without it is broken and says so here
# (a skip would hide the one real-Flower test, as it did while flwr could not share the lock).
from fedweb_client.flower import FedWebStrategy
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from tests.external.flower_inprocess import InProcessGrid

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
NODES, ROUNDS, DIM = 5, 4, 8
WEIGHTS = np.linspace(-1, 1, DIM).astype(np.float32)  # what the clients' data follows


def client_data(partition: int):
    rng = np.random.default_rng(partition)
    x = rng.normal(size=(40 + 10 * partition, DIM)).astype(np.float32)
    return x, x @ WEIGHTS


def make_client_app() -> ClientApp:
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        w = msg.content["arrays"].to_numpy_ndarrays()[0]
        x, y = client_data(context.node_config["partition-id"])
        for _ in range(5):
            w = w - 0.05 * 2 * x.T @ (x @ w - y) / len(x)
        loss = float(np.mean((x @ w - y) ** 2))
        metrics = MetricRecord({"train_loss": loss, "grad_steps": 5, "num-examples": len(x)})
        return Message(RecordDict({"arrays": ArrayRecord([w.astype(np.float32)]), "metrics": metrics}), reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        w = msg.content["arrays"].to_numpy_ndarrays()[0]
        x, y = client_data(context.node_config["partition-id"])
        err = x @ w - y
        metrics = {
            "eval_loss": float(np.mean(err**2)),
            "eval_acc": float(np.mean(np.abs(err) < 0.5)),
            "num-examples": len(x),
        }
        return Message(RecordDict({"metrics": MetricRecord(metrics)}), reply_to=msg)

    return app


@pytest.fixture
def api_token(live_env) -> str:
    return Token.objects.create(user=get_user_model().objects.create_user("flo", password="pw")).key


def test_a_flower_run_reports_every_round_to_fedweb(daphne, api_token, tmp_path):
    server_app = ServerApp()
    seen = {}

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        strategy = FedWebStrategy(
            FedAvg(fraction_train=1.0, fraction_evaluate=0.6, min_evaluate_nodes=3),
            url=f"http://{daphne}", token=api_token, name="flower fedavg", config={"strategy": "FedAvg", "nodes": NODES},
            journal=tmp_path / "journal.jsonl",
        )  # fmt: skip
        seen["result"] = strategy.start(
            grid=grid, initial_arrays=ArrayRecord([np.zeros(DIM, np.float32)]), num_rounds=ROUNDS,
            evaluate_fn=lambda r, arrays: MetricRecord({"w_error": float(np.abs(arrays.to_numpy_ndarrays()[0] - WEIGHTS).max())}),
        )  # fmt: skip
        seen["run"] = strategy.run

    grid = InProcessGrid(make_client_app(), NODES, fail_nodes=[1005])  # one node's replies are errors
    server_app(grid, Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={}))

    run = seen["run"]
    assert run.errors == [], run.errors
    experiment = Experiment.objects.get(pk=run.id)
    assert (experiment.kind, experiment.status, experiment.name) == (Kind.EXTERNAL, Status.COMPLETED, "flower fedavg")
    assert experiment.spec == {"strategy": "FedAvg", "nodes": NODES}
    rows = list(RoundMetric.objects.filter(experiment=experiment).order_by("round"))
    assert [m.round for m in rows] == list(range(1, ROUNDS + 1))
    # One model as it travels: Flower's serialized array (the .npy bytes, header included).
    array = sum(len(a.data) for a in ArrayRecord([np.zeros(DIM, np.float32)]).values())
    assert DIM * 4 < array < DIM * 4 + 200
    evaluated = 3  # fraction_evaluate 0.6 of 5 nodes
    result = seen["result"]
    for m in rows:
        assert (m.participants, m.completed, m.dropped) == (NODES, NODES - 1, 1)
        assert m.bytes_down == (NODES + evaluated) * array  # train and evaluate instructions carry the model
        assert m.bytes_up == (NODES - 1) * array  # the replies that trained carry it back
        assert m.round_seconds > 0
        assert m.train_loss == pytest.approx(result.train_metrics_clientapp[m.round]["train_loss"])
        assert m.test_loss == pytest.approx(result.evaluate_metrics_clientapp[m.round]["eval_loss"])
        assert m.test_accuracy == pytest.approx(result.evaluate_metrics_clientapp[m.round]["eval_acc"])
    custom = dict(CustomMetric.objects.filter(experiment=experiment).values_list("round", "values"))
    assert custom[ROUNDS]["server/w_error"] == pytest.approx(result.evaluate_metrics_serverapp[ROUNDS]["w_error"])
    # Flower weighs the replies: 4.999999999999999 in one order.
    assert custom[1]["train/grad_steps"] == pytest.approx(5)
    assert rows[-1].train_loss < rows[0].train_loss  # it learned
