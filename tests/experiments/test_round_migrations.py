"""Old databases keep loading: the RoundMetric columns derived from fedweb_engine/results/round_fields.py
are what the migrations make, and a round stored before a field was declared reads back without it."""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from orchestrator.experiments.rounds import rounds_of, table_rows
from orchestrator.models import Experiment
from orchestrator.web.charts import dashboard_charts
from tests.conftest import TINY_SPEC
from tests.factories import round_result

# A migration before each round field added later, and the fields a round stored then lacks.
BEFORE = {
    "update_norm": ("0012_mlflow_experiments_runs", ("update_norm",)),
    "personal_accuracy": ("0013_roundmetric_update_norm", ("personal_accuracy_mean", "personal_accuracy_worst10")),
}


@pytest.mark.django_db
def test_it_has_a_migration_for_every_declared_round_field():
    out = io.StringIO()
    call_command("makemigrations", "orchestrator", "--check", "--dry-run", stdout=out)  # exits 1 on a missing one
    assert "No changes detected" in out.getvalue()


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("added", BEFORE)
def test_it_loads_a_round_recorded_before_a_field_existed(user, added):
    migration, missing = BEFORE[added]
    target = [("orchestrator", migration)]
    executor = _migrate(target)
    try:
        old = executor.loader.project_state(target).apps
        experiment = old.get_model("orchestrator", "Experiment").objects.create(
            owner_id=user.pk, name="old", spec=TINY_SPEC
        )
        model = old.get_model("orchestrator", "RoundMetric")
        columns = {f.name for f in model._meta.get_fields()}
        assert not columns & set(missing), f"{migration} already has {sorted(columns & set(missing))}"
        values = {k: v for k, v in round_result(1).items() if k in columns}
        model.objects.create(experiment_id=experiment.pk, worker="w", **values)
    finally:
        executor = _migrate(executor.loader.graph.leaf_nodes())

    rounds = rounds_of(Experiment.objects.get(pk=experiment.pk))
    assert all(rounds[0][k] is None for k in missing) and rounds[0]["test_accuracy"] == values["test_accuracy"]
    assert table_rows(rounds)[0][0] == "1"
    figures = dashboard_charts(rounds, TINY_SPEC)["figures"]
    assert "chart-update_norm" not in figures and "chart-clients" not in figures  # charts it never had
