from django.apps import AppConfig


class OrchestratorConfig(AppConfig):
    name = "orchestrator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from orchestrator import access_signals, scheduling  # noqa: F401 - connect their receivers
