"""The web pages, one module per concern: ``pages`` (list, new, dashboard), ``downloads``
(rounds CSV/JSON, report), ``controls`` (pause/resume/cancel, delete), ``compare``, ``workers``,
``health``. ``orchestrator/web/urls.py`` names each view by its module."""
