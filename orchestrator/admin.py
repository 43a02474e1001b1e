from django.contrib import admin

from fedweb_engine.results import round_fields
from orchestrator.models import Checkpoint, Experiment, LogEntry, RoundMetric, Worker


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "owner", "status", "current_round", "total_rounds", "queue", "created"]
    list_filter = ["status", "queue"]
    search_fields = ["name", "description"]


@admin.register(RoundMetric)
class RoundMetricAdmin(admin.ModelAdmin):
    # The rounds table's columns, as the round fields declare them (fedweb_engine/results/round_fields.py).
    list_display = ["experiment", *(f.name for f, _ in round_fields.columns()), "device"]


@admin.register(Checkpoint)
class CheckpointAdmin(admin.ModelAdmin):
    list_display = ["experiment", "round", "path", "size_bytes", "created"]


@admin.register(LogEntry)
class LogEntryAdmin(admin.ModelAdmin):
    list_display = ["experiment", "time", "level", "message"]
    list_filter = ["level"]


@admin.register(Worker)
class WorkerAdmin(admin.ModelAdmin):
    list_display = ["hostname", "queue", "last_heartbeat", "current_experiment"]
