from django.apps import AppConfig

from fedweb_engine.components.plugins import load_plugins


class OrchestratorConfig(AppConfig):
    name = "orchestrator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # why: these connect signal receivers and import the models, which Django allows only once
        # every app is loaded, that is here (its documented place for them).
        from orchestrator.fleet import scheduling  # noqa: F401
        from orchestrator.live import signals  # noqa: F401
        from orchestrator.sweeps import search  # noqa: F401

        # The web validates specs and records their plugins' provenance, so it loads the same plugins
        # as the workers, at start-up: one that fails to import stops the process, naming it. A Celery
        # worker sets Django up (so runs this) before its own start-up (workers.startup) and then forks
        # its pool, so a plugin that initialises CUDA on import is refused here, by name; no process
        # that runs this needs CUDA while importing plugins.
        load_plugins(forbid_cuda=True)
