from django.apps import AppConfig


class OrchestratorConfig(AppConfig):
    name = "orchestrator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from orchestrator.fleet import scheduling  # noqa: F401 - connect their receivers
        from orchestrator.live import access_signals  # noqa: F401 - connect their receivers
        from workers.engine.plugins import load_plugins

        # The web validates specs and records their plugins' provenance, so it loads the same plugins
        # as the workers, at start-up: one that fails to import stops the process, naming it.
        load_plugins()
