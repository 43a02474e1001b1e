"""Recording a batch of reported rounds of an external run.

A batch is ``{"rounds": [{"round": 1, "metrics": {"loss": 0.5, "my/metric": 2}}, ...]}``. It is
judged in full before anything is stored, so a refused batch stores nothing. Standard names go to the
same ``RoundMetric`` row (and the same round event) a native round makes, so the dashboard
and the compare page read external rounds unchanged; every other name goes to ``CustomMetric``.

Idempotent per round: a resend of a recorded round with the same values is skipped; a different
value for it, or a round before the last recorded one, is a ``Conflict`` (409).
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from fedweb_engine.results import round_fields
from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric, ExternalRun
from orchestrator.live import events

MAX_ROUNDS_PER_BATCH = 1000
MAX_NAMES_PER_ROUND = 64
MAX_ROUND = 10**9
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]{0,63}")
# Short names a script writes, for the RoundMetric fields they fill.
ALIASES = {"loss": "train_loss", "accuracy": "test_accuracy", "memory_mb": "rss_mb"}
# The standard names are the declared round fields that hold one number (fedweb_engine/results/round_fields.py),
# the round's own number aside: a field declared there is a name a report can fill.
_NUMBERS = [f for f in round_fields.FIELDS if f.type in (int, float) and f.name != "round"]
FLOAT_FIELDS = tuple(f.name for f in _NUMBERS if f.type is float)
INT_FIELDS = tuple(f.name for f in _NUMBERS if f.type is int)
STANDARD = (*FLOAT_FIELDS, *INT_FIELDS)
# RoundMetric's columns that are not numbers and not nullable: "external" for the device, an empty
# list. A number a report leaves out stays null (absent), never 0: charts and summaries skip it.
_EMPTY = {str: "external"}
DEFAULTS = {f.name: _EMPTY.get(f.type, []) for f in round_fields.FIELDS if not f.null and f.type not in (int, float)}
ACCEPTING = (Status.RUNNING, Status.CRASHED)  # a crashed run that reports again is running again
# SQLite has one write lock for the whole file, and a writer that finds it taken polls it with sleeps
# that grow to 100 ms (sqlite3_busy_timeout): reports of different runs that daphne's request threads
# recorded at once waited up to half a second for each other (python -m benchmarks ingest_live). In
# one process they queue on this lock instead, and each goes as soon as the one before commits.
_SQLITE_WRITER = threading.Lock()


class IngestError(ValueError):
    """A refused batch: ``field`` names what is wrong (the API answers 400 keyed by it)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class Conflict(IngestError):
    """A batch that contradicts what is recorded (the API answers 409)."""


@dataclass(frozen=True)
class Report:
    round: int
    standard: dict  # RoundMetric field -> value
    custom: dict  # user name -> value


def parse_batch(body) -> list[Report]:
    """The batch's reports in round order, or ``IngestError`` naming the first bad field."""
    if not isinstance(body, dict):
        raise IngestError("rounds", 'The body must be an object: {"rounds": [{"round": 1, "metrics": {...}}]}')
    items = body.get("rounds")
    if not isinstance(items, list) or not items:
        raise IngestError("rounds", "rounds must be a non-empty list of {round, metrics}")
    if len(items) > MAX_ROUNDS_PER_BATCH:
        raise IngestError("rounds", f"At most {MAX_ROUNDS_PER_BATCH} rounds per request (got {len(items)})")
    reports = [_parse_item(item, i) for i, item in enumerate(items)]
    for prev, cur in zip(reports, reports[1:], strict=False):
        if cur.round <= prev.round:
            raise IngestError("rounds", f"Rounds must increase within a request (round {cur.round} after {prev.round})")
    return reports


def _parse_item(item, i: int) -> Report:
    where = f"rounds[{i}]"
    if not isinstance(item, dict):
        raise IngestError(where, f"{where} must be an object with round and metrics")
    number = item.get("round")
    if type(number) is not int or not 1 <= number <= MAX_ROUND:
        raise IngestError(f"{where}.round", f"{where}.round must be a whole number from 1 to {MAX_ROUND}")
    metrics = item.get("metrics")
    if not isinstance(metrics, dict):
        raise IngestError(f"{where}.metrics", f"{where}.metrics must be an object of name: number")
    if len(metrics) > MAX_NAMES_PER_ROUND:
        raise IngestError(f"{where}.metrics", f"At most {MAX_NAMES_PER_ROUND} metrics per round (got {len(metrics)})")
    standard, custom = {}, {}
    for name, value in metrics.items():
        field = f"{where}.metrics.{name}"[:120]
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise IngestError(
                field,
                "A metric name is 1-64 letters, digits, '_', '.', '/' or '-', not starting with one of '.-/' or a digit",
            )
        if type(value) not in (int, float) or not math.isfinite(value):
            raise IngestError(field, f"{name} must be a finite number")
        target = ALIASES.get(name, name)
        if target in INT_FIELDS:
            if type(value) is not int or value < 0:
                raise IngestError(field, f"{name} must be a whole number >= 0")
            standard[target] = value
        elif target in FLOAT_FIELDS:
            standard[target] = float(value)
        else:
            custom[name] = value
    return Report(number, standard, custom)


def record(experiment_id: int, reports: list[Report]) -> dict:
    """Store the reports of one run; ``{"recorded": [...], "duplicates": [...]}`` (round numbers)."""
    with _one_writer(), transaction.atomic():
        # One writer per run at a time: the round order checks below see every earlier report.
        # Only the columns judged here: the whole row (31 columns, JSON and dates to decode) cost a
        # report ~0.15 ms of CPU, and the run token's check has just read it.
        experiment = (
            Experiment.objects.select_for_update().only("status", "current_round", "total_rounds").get(pk=experiment_id)
        )
        stored = _stored(experiment, [r.round for r in reports if r.round <= experiment.current_round])
        fresh = []
        for report in reports:
            if report.round > experiment.current_round:
                fresh.append(report)
            elif report.round in stored:
                _check_same(report, stored[report.round])
            else:
                raise Conflict(
                    "rounds", f"Round {report.round} goes backwards: round {experiment.current_round} is recorded"
                )
        # A resend of recorded rounds is answered even after the end (a retry whose answer was lost).
        if fresh and experiment.status not in ACCEPTING:
            raise Conflict("status", f"The run is {experiment.status}: it takes no more rounds")
        _check_name_budget(experiment, fresh)
        rows = _store(experiment, fresh)
        now = timezone.now()
        changes = {"last_report": now}
        ExternalRun.objects.filter(experiment=experiment).update(**changes)
        if fresh:
            last = fresh[-1].round
            Experiment.objects.filter(pk=experiment.pk).update(
                current_round=last, total_rounds=max(experiment.total_rounds, last), status=Status.RUNNING
            )
        elif experiment.status == Status.CRASHED:
            Experiment.objects.filter(pk=experiment.pk).update(status=Status.RUNNING)
        # Published once the rows are committed: called inside a caller's transaction (the MLflow
        # API), the events wait for that one, so no event announces a round that was rolled back.
        if experiment.status == Status.CRASHED:
            transaction.on_commit(lambda: _publish_status(experiment.pk))
        # The native path's round events (the dashboard's live charts and the metrics exporter take
        # them as they are), the batch's in one send: a send per round held the web process's one
        # thread for sync views that much longer (events.publish_rounds).
        published = [
            {**row.to_result_dict(), "worker": row.worker, "custom": report.custom}  # as the rounds table has it
            for report, row in zip(fresh, rows, strict=True)
        ]
        if published:
            RoundMetric.fold_in(experiment.pk, published)  # the runs table's summary row
        if published:
            transaction.on_commit(lambda: events.publish_rounds(experiment.pk, published))
    return {"recorded": [r.round for r in fresh], "duplicates": [r.round for r in reports if r not in fresh]}


def _one_writer():
    # Only when this opens the transaction: inside a caller's (the MLflow API) SQLite's write lock may
    # be held already, and waiting here while holding it would stall the holder of this one for the
    # busy timeout (30 s).
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        return _SQLITE_WRITER
    return contextlib.nullcontext()


def _publish_status(pk: int) -> None:
    events.publish_status(Experiment.objects.get(pk=pk))


def end(experiment: Experiment, target: str, error: str = "") -> bool:
    """End a run that accepts reports as ``target`` (completed or failed); False if it had ended
    otherwise already. Ending it the same way again is a no-op that answers True."""
    if experiment.status == target:
        return True
    changes = {"status": target, "finished": timezone.now(), "error": error}
    if not Experiment.objects.filter(pk=experiment.pk, status__in=ACCEPTING).update(**changes):
        experiment.refresh_from_db()
        return False
    experiment.refresh_from_db()
    experiment.log("error" if error else "info", error or f"Finished after {experiment.current_round} rounds")
    experiment._status_changed()
    return True


def _stored(experiment, numbers: list[int]) -> dict[int, tuple[dict, dict]]:
    if not numbers:  # the usual report: only new rounds (an empty IN still cost two query compilations)
        return {}
    metrics = {m.round: m for m in RoundMetric.objects.filter(experiment=experiment, round__in=numbers)}
    custom = dict(CustomMetric.objects.filter(experiment=experiment, round__in=numbers).values_list("round", "values"))
    return {n: (m.to_result_dict(), custom.get(n, {})) for n, m in metrics.items()}


def _check_same(report: Report, stored: tuple[dict, dict]) -> None:
    standard, custom = stored
    reported = {**DEFAULTS, **report.standard}
    differing = [k for k in STANDARD if reported.get(k) != standard.get(k)]
    if report.custom != custom:
        differing += sorted(
            set(report.custom) ^ set(custom) | {k for k in report.custom if report.custom[k] != custom.get(k)}
        )
    if differing:
        raise Conflict(
            "rounds", f"Round {report.round} is already recorded with other values ({', '.join(differing[:5])})"
        )


def _check_name_budget(experiment, fresh: list[Report]) -> None:
    reported = set().union(*(r.custom for r in fresh))
    last = CustomMetric.objects.filter(experiment=experiment).order_by("-round").values_list("values", flat=True)
    if reported <= set(last.first() or ()):
        return  # no name the run's last round lacks: the count cannot grow (the usual report)
    # A new name: count them all. Reading every round's names on every report made a report's
    # cost grow with the run's length (2 ms per 100 rounds here: python -m benchmarks ingest_live).
    names = set(reported)
    for values in CustomMetric.objects.filter(experiment=experiment).values_list("values", flat=True):
        names.update(values)
    limit = settings.FEDWEB_EXTERNAL_MAX_METRICS
    if len(names) > limit:
        raise IngestError("metrics", f"A run has at most {limit} custom metric names (this batch makes {len(names)})")


def _store(experiment, reports: list[Report]) -> list[RoundMetric]:
    """The batch's rows, in two INSERTs (round metrics, custom metrics), not two per round."""
    rows = [
        RoundMetric(experiment=experiment, round=r.round, worker="external", **{**DEFAULTS, **r.standard})
        for r in reports
    ]
    RoundMetric.objects.bulk_create(rows)
    CustomMetric.objects.bulk_create(
        [CustomMetric(experiment=experiment, round=r.round, values=r.custom) for r in reports if r.custom]
    )
    return rows
