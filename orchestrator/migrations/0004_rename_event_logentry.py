from django.db import migrations, models


class Migration(migrations.Migration):
    """The log-line model was called Event, a word the WebSocket payloads also use: now LogEntry."""

    dependencies = [
        ("orchestrator", "0003_experiment_round_lease_dispatch"),
    ]

    operations = [
        migrations.RenameModel(old_name="Event", new_name="LogEntry"),
        migrations.AlterModelOptions(
            name="logentry", options={"ordering": ["time", "id"], "verbose_name_plural": "log entries"}
        ),
        migrations.AlterField(
            model_name="logentry",
            name="experiment",
            field=models.ForeignKey(
                on_delete=models.deletion.CASCADE, related_name="log_entries", to="orchestrator.experiment"
            ),
        ),
    ]
