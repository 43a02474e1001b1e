"""The static HTML report of a run: one file with plotly.js, the page's chart code, the styles and
the data inlined, so it opens from file:// on a machine with no server and no network."""

from __future__ import annotations

import json

from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.safestring import mark_safe

from orchestrator.experiments.leak import leak_warnings
from orchestrator.experiments.models import Experiment, Kind
from orchestrator.experiments.public import host_names, redact, redact_events
from orchestrator.experiments.round_table import rounds_of, table_columns, table_rows
from orchestrator.experiments.summaries import cells, summarize
from orchestrator.web.charts import dashboard_charts
from orchestrator.web.notes import render_notes


def _static_text(relative: str) -> str:
    text = (settings.BASE_DIR / "static" / relative).read_text(encoding="utf-8")
    # Inside <script>/<style> only "</" could end the element early; "<\/" means the same to JS.
    return mark_safe(text.replace("</", "<\\/"))


def render_report(experiment: Experiment, *, public: bool = False) -> str:
    """The report's HTML; ``public`` (for public-link holders) leaves out worker host names."""
    rounds = rounds_of(experiment, public=public)
    events = list(experiment.log_entries.order_by("time", "id")[:500])
    hosts = host_names(experiment) if public else []
    ctx = {
        "experiment": experiment,
        "charts": dashboard_charts(rounds, None if experiment.kind == Kind.EXTERNAL else experiment.spec),
        "last_rounds": table_rows(rounds, experiment.spec),
        "table_columns": table_columns(rounds, experiment.spec),
        # The dashboard's summary block: the run summaries the round fields declare.
        "summary": cells(summarize(rounds)),
        "leak_warnings": leak_warnings(rounds),
        "events": redact_events(events, hosts) if public else events,
        "error": redact(experiment.error, hosts),
        "public": public,
        "notes_html": render_notes(experiment.notes),
        "spec_json": json.dumps(experiment.spec, indent=2),
        "page": {
            "id": experiment.pk,
            "status": experiment.status,
            "total_rounds": experiment.total_rounds,
            "table_columns": table_columns(rounds, experiment.spec),
        },
        "generated": timezone.now(),
        "plotly_js": _static_text("vendor/plotly.min.js"),
        "charts_js": _static_text("js/charts.js"),
        "page_js": _static_text("js/experiment_detail.js"),
        "css": _static_text("css/app.css"),
    }
    return render_to_string("orchestrator/report.html", ctx)
