"""docs/grafana-dashboard.json: the panels operators asked for, over metrics that exist."""

import json
import re
from pathlib import Path

import pytest

from orchestrator.fleet.prometheus import FleetCollector, RoundTally
from workers.exporter import WorkerCollector

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""]}


def _exposed_names() -> set[str]:
    """Every sample name the web and worker collectors can produce, from their metric families."""
    families = [*FleetCollector(RoundTally()).collect(), *WorkerCollector("w1@host", "cpu").collect()]
    return {family.name + suffix for family in families for suffix in SUFFIXES[family.type]}


def _panels() -> list[dict]:
    return json.loads(DASHBOARD.read_text())["panels"]


def test_it_has_a_panel_for_each_fleet_figure():
    titles = {panel["title"] for panel in _panels()}
    for wanted in ["Queue depth", "Rounds per second", "Round duration p50 / p95", "Experiments by status",
                   "Workers alive", "GPU memory"]:  # fmt: skip
        assert wanted in titles


@pytest.mark.django_db
def test_it_queries_only_metrics_that_fedweb_exposes():
    exposed = _exposed_names()
    queried = {
        name
        for panel in _panels()
        for target in panel["targets"]
        for name in re.findall(r"\bfedweb_[a-z_]+", target["expr"])
    }
    assert queried and queried <= exposed, queried - exposed


def test_it_asks_for_p50_and_p95_of_the_round_histogram():
    [panel] = [p for p in _panels() if p["title"] == "Round duration p50 / p95"]
    exprs = [t["expr"] for t in panel["targets"]]
    assert any(e.startswith("histogram_quantile(0.5,") for e in exprs)
    assert any(e.startswith("histogram_quantile(0.95,") for e in exprs)
    assert all("fedweb_round_duration_seconds_bucket" in e for e in exprs)
