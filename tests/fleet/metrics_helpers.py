"""Reading Prometheus text the way Prometheus does (prometheus_client's own parser)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    """``{(sample name, frozenset(labels.items())): value}`` for every sample of an exposition."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, metric: str, /, **labels) -> float | None:
    """The sample ``metric`` whose labels include ``labels``, summed when several match; None when absent."""
    wanted = set(labels.items())
    found = [v for (n, have), v in samples.items() if n == metric and wanted <= have]
    return sum(found) if found else None


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def round_row(experiment, number: int, seconds: float, device: str = "cpu", **fields):
    """A stored round, as a worker records it (only what the metrics read matters)."""
    from orchestrator.experiments.records import RoundMetric

    values = dict(
        participants=4, completed=4, stragglers=0, dropped=0, bytes_down=0, bytes_up=0, bytes_formula=0,
        round_seconds=seconds, train_seconds=seconds, samples=1, rss_mb=1.0, threads=1, device=device,
    )  # fmt: skip
    return RoundMetric.objects.create(experiment=experiment, round=number, **{**values, **fields})
