"""Where Django finds the app's models: each lives with its concern and is imported from there.

``orchestrator.experiments.models`` (Experiment), ``orchestrator.experiments.records`` (RoundMetric,
Checkpoint, LogEntry), ``orchestrator.fleet.workers`` (Worker), ``orchestrator.fleet.gangs`` (Gang),
``orchestrator.sweeps.models`` (Sweep, and a search's Trial) and ``orchestrator.external.models`` (external runs and their
MLflow folders), ``orchestrator.runs.run_summary`` and ``edits`` (a run's summary row and
its edits), ``orchestrator.runs.saved`` (the runs table's saved views and column choices). Django imports an app's ``models`` module to register its models, so this one
gathers them; FedWeb's own code imports each model from its concern (tests/test_layers.py checks it).
"""

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import Checkpoint, LogEntry, RoundMetric
from orchestrator.external.models import CustomMetric, ExternalRun, MlflowExperiment, MlflowRun
from orchestrator.fleet.gangs import Gang
from orchestrator.fleet.workers import Worker
from orchestrator.runs.edits import RunEdit
from orchestrator.runs.run_summary import RunSummary, TargetStep
from orchestrator.runs.saved import SavedView, TablePrefs
from orchestrator.sweeps.models import Sweep, Trial

__all__ = [
    "Checkpoint", "CustomMetric", "Experiment", "ExternalRun", "Gang", "LogEntry", "MlflowExperiment", "MlflowRun",
    "RoundMetric", "RunEdit", "RunSummary", "SavedView", "Sweep", "TablePrefs", "TargetStep", "Trial", "Worker",
]  # fmt: skip
