"""Every field of a round's record, declared once: what it is, its unit, how it is stored, and how
the rounds table, the charts and the run's summary show it.

From ``FIELDS`` come the engine's ``RoundResult`` (``fedweb_engine.results.round_result``), the ``RoundMetric``
columns (``orchestrator.experiments.records``), the rounds table and the CSV, the charts
(``orchestrator.web.charts``) and the summaries (``orchestrator.experiments.summaries``, in Python
and in SQL). The pages' script gets the same declarations as data (the ``Formula``s, the
``Summary`` rules), so it evaluates what is declared here and writes no formula of its own.

Plain data: no Django, no plotting library. Adding a per-round scalar is one ``Field`` here, the
line of the engine that fills it, and the migration ``makemigrations`` writes for its column.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

MB = 1e-6  # bytes -> MB


@dataclass(frozen=True)
class Formula:
    """How a chart or an axis reads one number from a round: the sum of ``keys`` (None if any is
    missing) less the sum of ``minus`` (a missing one counts 0: a round recorded before that field),
    divided by ``per`` (None unless it is > 0), times ``scale``; with ``nonzero``, a 0 is no point
    (a run that sends nothing of the kind draws no trace); with ``cumulative``, added to the
    previous point. The pages' script evaluates the same data (``as_data``)."""

    keys: tuple[str, ...]
    scale: float = 1.0
    per: str = ""
    cumulative: bool = False
    minus: tuple[str, ...] = ()
    nonzero: bool = False

    def value(self, result: dict) -> float | None:
        values = [result.get(key) for key in self.keys]
        if any(v is None for v in values):
            return None
        total = float(sum(values)) - float(sum(result.get(key) or 0 for key in self.minus))
        if self.nonzero and total == 0:
            return None
        if self.per:
            divisor = result.get(self.per)
            if not divisor or divisor <= 0:
                return None
            total /= divisor
        return total * self.scale

    def points(self, rounds: list[dict]) -> tuple[list[int], list[float]]:
        """One point per round that has a value (evaluation may skip rounds)."""
        xs, ys, running = [], [], 0.0
        for result in rounds:
            y = self.value(result)
            if y is None:
                continue
            running = running + y if self.cumulative else y
            xs.append(result["round"])
            ys.append(running)
        return xs, ys

    def as_data(self) -> dict:
        data = {"keys": list(self.keys), "scale": self.scale, "per": self.per, "cumulative": self.cumulative}
        return {
            **data,
            **({"minus": list(self.minus)} if self.minus else {}),
            **({"nonzero": True} if self.nonzero else {}),
        }


@dataclass(frozen=True)
class Plot:
    """A trace of ``chart`` drawn from this field (or from ``formula`` when given)."""

    chart: str  # a ``Chart.id``; a chart not in CHARTS is made from the field's label and unit
    name: str  # the legend's
    color: str
    formula: Formula | None = None  # default: the field's own value
    kind: str = "line"  # "line" (lines and markers), "plain" (lines only) or "bar"
    dash: str = "solid"
    right_axis: bool = False
    compare: str = ""  # on the compare page, once per experiment: "solid" (bold, in the legend) or "dot" (faint)
    fill: str = ""  # "tonexty": shade down to the previous trace (a quantile band)
    rank: int = 0  # traces of a chart are in (rank, declaration) order


@dataclass(frozen=True)
class Column:
    """The field as a column of the rounds table."""

    label: str
    digits: int | None = None  # decimals; None shows the value as it is
    scale: float = 1.0  # the value is divided by this (bytes -> MB)
    rank: int = 0  # columns are in (rank, declaration) order
    when: str = ""  # shown only for runs that record this field (e.g. "ranks": distributed runs)


# How a summary folds a run's rounds into one number (each over the rounds where its value is not null).
AGGREGATES = ("last", "max", "min", "sum", "count")


@dataclass(frozen=True)
class Summary:
    """A number that sums up a run: a column of the list and compare tables and of the summary block."""

    key: str
    label: str  # the table heading
    title: str  # the summary block's
    aggregate: str  # one of AGGREGATES
    digits: int
    keys: tuple[str, ...] = ()  # summed per round; default: the field itself
    scale: float = 1.0  # the value is divided by this for display
    unit: str = ""
    rank: int = 0  # summaries are in (rank, declaration) order


@dataclass(frozen=True)
class Chart:
    """A chart's frame; its traces are the ``Plot``s that name it."""

    id: str
    title: str
    y_title: str
    compare_title: str = ""
    y2_title: str = ""
    y_range: tuple[float, float] | None = None
    barmode: str = ""
    # Drawn only for runs that record ``optional`` (a field name), or whose spec plans it (see charts.py).
    optional: str = ""
    note: str = ""  # what the traces are, under the chart (a reader should not have to guess "Σ formula")


@dataclass(frozen=True)
class Field:
    """One field of the round record."""

    name: str
    type: type  # int, float, str, or a list of one of them
    doc: str
    unit: str = ""
    null: bool = False  # None allowed: then it defaults to None (a result of an older worker still records)
    wide: bool = False  # an int that can pass 2³¹ (bytes, samples): stored as a 64-bit column
    column: Column | None = None
    plots: tuple[Plot, ...] = ()
    summaries: tuple[Summary, ...] = ()

    @property
    def label(self) -> str:
        return self.doc.split(":")[0].split(";")[0]


def _band(prefix: str, color: str, shade: str, chart: str) -> dict[int, tuple[Plot, ...]]:
    """p10–p90 and p25–p75 bands and the median of ``prefix_pNN`` fields, per quantile."""
    fill = {90: "tonexty", 75: "tonexty"}
    plots = {q: (Plot(chart, f"p{q}", shade, kind="plain", fill=fill.get(q, "")),) for q in (10, 25, 75, 90)}
    plots[50] = (Plot(chart, "median", color),)
    return plots


_ACC = _band("client_accuracy", "#16a34a", "rgba(22,163,74,0.25)", "clients")
_LOSS = _band("train_loss", "#2563eb", "rgba(37,99,235,0.2)", "client-loss")
# The bands are drawn p10, p90, p25, p75, median: each upper edge fills down to its lower one.
_BAND_RANK = {10: 0, 90: 1, 25: 2, 75: 3, 50: 4}


def _quantiles(prefix: str, what: str, band: dict[int, tuple[Plot, ...]]) -> tuple[Field, ...]:
    return tuple(
        Field(f"{prefix}_p{q}", float, f"{what}, p{q}", null=True,
              plots=tuple(Plot(**{**asdict(p), "rank": _BAND_RANK[q]}) for p in band[q]))
        for q in (10, 25, 50, 75, 90)
    )  # fmt: skip


def _mb(*keys: str, cumulative: bool = False, minus: tuple[str, ...] = (), nonzero: bool = False) -> Formula:
    return Formula(keys, scale=MB, cumulative=cumulative, minus=minus, nonzero=nonzero)


CHARTS: tuple[Chart, ...] = (
    Chart("loss", "Loss", "loss", compare_title="Test loss (bold) and train loss (faint)"),
    Chart("accuracy", "Test accuracy", "accuracy", compare_title="Test accuracy", y_range=(0.0, 1.0)),
    Chart("memory", "Memory per round", "MB", compare_title="Memory: host RSS (bold) and VRAM peak (faint)"),
    # The fp32 formula counts down + up for the whole cohort, so the bars stack up and down to the same total.
    Chart("bandwidth", "Bandwidth", "MB per round, up + down", compare_title="Cumulative bandwidth, up + down",
          y2_title="MB since round 1 (Σ)", barmode="stack",
          note="Bars: bytes measured this round, stacked: the model sent down and the updates sent up, each "
               "with its link's codec, and what a client algorithm sends beside them (SCAFFOLD's control "
               "variates: always fp32). fp32 formula: the same round uncompressed, (model down + update up) × "
               "sampled clients. The Σ lines (right axis) add the rounds up since round 1."),
    Chart("time", "Round time and throughput", "seconds", compare_title="Round time (seconds)", y2_title="clients / s"),
    Chart("participants", "Participants per round", "clients", compare_title="Clients aggregated per round"),
    Chart("clients", "Per-client accuracy (own test data)", "accuracy", y_range=(0.0, 1.0), optional="client_accuracy_mean",
          compare_title="Per-client accuracy: mean (solid) and worst 10% (dotted)"),
    Chart("client-loss", "Per-client training loss", "loss", optional="train_loss_p50"),
    Chart("privacy", "Privacy spent", "ε", compare_title="Privacy spent (ε)", y2_title="clip norm C", optional="dp_epsilon"),
)  # fmt: skip

# The x axes a reader can pick besides the round: what the run had spent by then.
X_AXES = {"seconds": Formula(("round_seconds",), cumulative=True), "mb": _mb("bytes_up", "bytes_down", cumulative=True)}

FIELDS: tuple[Field, ...] = (
    Field("round", int, "1-based round number", column=Column("Round"),
          summaries=(Summary("rounds", "Rounds", "Rounds done", "count", 0, rank=4),)),
    Field("participants", int, "clients sampled (the cohort)", column=Column("Clients"),
          plots=(Plot("participants", "sampled", "#2563eb", kind="plain"),)),
    Field("completed", int, "clients whose update was aggregated", column=Column("Done"),
          plots=(Plot("participants", "completed", "#16a34a", compare="solid"),
                 Plot("time", "clients / s", "#9333ea", Formula(("completed",), per="round_seconds"), right_axis=True,
                      rank=1))),
    Field("stragglers", int, "clients in the cohort that could do only part of the local work",
          plots=(Plot("participants", "stragglers", "#ea580c", kind="plain", dash="dash"),)),
    Field("dropped", int, "clients whose update was not aggregated (dropout, or stragglers under 'drop')",
          plots=(Plot("participants", "dropped", "#dc2626", kind="plain", dash="dot"),)),
    Field("train_loss", float, "sample-weighted mean local training loss of the aggregated clients", null=True,
          column=Column("Train loss", 4), plots=(Plot("loss", "train loss", "#2563eb", compare="dot"),)),
    Field("test_loss", float, "the global model's loss on the test set; None on rounds without evaluation", null=True,
          column=Column("Test loss", 4), plots=(Plot("loss", "test loss", "#dc2626", compare="solid"),),
          summaries=(Summary("final_loss", "Final loss", "Final test loss", "last", 4, rank=3),
                     Summary("best_loss", "Best loss", "Best test loss", "min", 4, rank=3))),
    Field("test_accuracy", float, "the global model's accuracy on the test set", null=True,
          column=Column("Accuracy", 4), plots=(Plot("accuracy", "test accuracy", "#16a34a", compare="solid"),),
          summaries=(Summary("final_accuracy", "Final acc.", "Final test accuracy", "last", 4, rank=1),
                     Summary("best_accuracy", "Best acc.", "Best test accuracy", "max", 4, rank=2))),
    Field("bytes_down", int, "encoded payload bytes sent to the cohort (with bytes_extra_down)", "bytes", wide=True,
          column=Column("Down MB", 2, 1e6, rank=2),
          plots=(Plot("bandwidth", "down: model", "#2563eb", _mb("bytes_down", minus=("bytes_extra_down",)),
                      kind="bar", rank=1),)),
    Field("bytes_up", int, "encoded payload bytes received from reporting clients (with bytes_extra_up)", "bytes",
          wide=True, column=Column("Up MB", 2, 1e6, rank=1),
          plots=(Plot("bandwidth", "up: updates", "#ea580c", _mb("bytes_up", minus=("bytes_extra_up",)), kind="bar"),
                 Plot("bandwidth", "Σ measured", "#111827", _mb("bytes_up", "bytes_down", cumulative=True),
                      kind="plain", right_axis=True, compare="solid", rank=2)),
          summaries=(Summary("bytes", "Total MB", "MB communicated (up + down)", "sum", 2, ("bytes_up", "bytes_down"),
                             scale=1e6, rank=6),)),
    Field("bytes_formula", int, "uncompressed fp32 estimate for the whole cohort: see fp32_bytes_formula", "bytes",
          wide=True,
          plots=(Plot("bandwidth", "fp32 formula, this round", "#6b7280", _mb("bytes_formula"), kind="plain",
                      dash="dash", rank=1),
                 Plot("bandwidth", "Σ fp32 formula", "#6b7280", _mb("bytes_formula", cumulative=True), kind="plain",
                      dash="dot", right_axis=True, rank=2))),
    Field("round_seconds", float, "wall-clock seconds of the round", "s", column=Column("Seconds", 2, rank=3),
          plots=(Plot("time", "round seconds", "#0f766e", compare="solid"),),
          summaries=(Summary("seconds", "Time", "Time (Σ round seconds)", "sum", 1, unit=" s", rank=5),)),
    Field("train_seconds", float, "seconds spent training and aggregating", "s"),
    Field("samples", int, "training samples processed (sum over clients and local steps)", wide=True),
    Field("rss_mb", float, "resident memory of the process running the simulation (with isolation: not the child's)",
          "MB", column=Column("RSS MB", 0, rank=3), plots=(Plot("memory", "host RSS", "#0891b2", compare="solid"),)),
    Field("threads", int, "threads of the process"),
    Field("vram_allocated_mb", float, "VRAM allocated; None on CPU", "MB", null=True,
          plots=(Plot("memory", "VRAM allocated", "#7c3aed"),)),
    Field("vram_reserved_mb", float, "VRAM reserved; None on CPU", "MB", null=True,
          plots=(Plot("memory", "VRAM reserved", "#a78bfa", dash="dot"),)),
    Field("vram_peak_mb", float, "VRAM peak; None on CPU", "MB", null=True, column=Column("VRAM peak MB", 0, rank=3),
          plots=(Plot("memory", "VRAM peak", "#db2777", compare="dot"),)),
    Field("device", str, "the device the round ran on"),
    # Federated evaluation (evaluation.clients): the global model on each evaluated client's own
    # test split, as a distribution; None on rounds without it. Quantiles, not every client: bounded.
    *_quantiles("client_accuracy", "accuracy of the evaluated clients", _ACC),
    Field("client_accuracy_mean", float, "mean accuracy of the evaluated clients", null=True,
          plots=(Plot("clients", "mean", "#2563eb", compare="solid", rank=5),)),
    Field("client_accuracy_worst10", float, "mean accuracy over the worst 10% of the evaluated clients", null=True,
          plots=(Plot("clients", "worst 10% mean", "#dc2626", compare="dot", rank=5),)),
    # A personalisation method (Ditto): each evaluated client's own personal model on its test split,
    # drawn beside the global model's lines above, so the gain for the worst clients shows at once.
    Field("personal_accuracy_mean", float, "mean accuracy of the evaluated clients' personal models", null=True,
          plots=(Plot("clients", "personal mean", "#7c3aed", dash="dash", rank=6),)),
    Field("personal_accuracy_worst10", float, "mean accuracy of the worst 10% of the evaluated clients' personal "
          "models", null=True, plots=(Plot("clients", "personal worst 10%", "#db2777", dash="dash", rank=6),)),
    # Quantiles of the aggregated clients' mean local training losses this round.
    *_quantiles("train_loss", "mean local training loss of the aggregated clients", _LOSS),
    Field("participation_histogram", list[int],
          "clients sampled exactly k times so far at index k (the last bin: that many or more)", null=True),
    # DP-FedAvg (privacy.mechanism): the clip norm used, the share of reported updates it clipped,
    # and ε at privacy.delta spent so far (filled in by the worker's accountant, not the engine).
    Field("dp_clip_norm", float, "clip norm C used this round", null=True,
          plots=(Plot("privacy", "clip norm C", "#6b7280", kind="plain", dash="dash", right_axis=True, rank=1),)),
    Field("dp_clipped_fraction", float, "share of the reported updates that were clipped", null=True),
    Field("dp_epsilon", float, "privacy spent so far (ε at privacy.delta)", "ε", null=True,
          plots=(Plot("privacy", "ε", "#9333ea", compare="solid"),),
          # ε only grows, so the last recorded value is the privacy spent by the whole run ("–" without DP).
          summaries=(Summary("epsilon", "Final ε", "Privacy spent (final ε)", "last", 3, rank=7),)),
    Field("update_norm", float, "update norm: L2 norm of the global model's change this round (0 when it did not step)",
          "‖Δw‖₂", null=True, column=Column("Update norm", 4, rank=3), plots=(Plot("update_norm", "update norm", "#0f766e"),)),
    # What a client algorithm sends beside the model and the updates (SCAFFOLD's c down, Δc_i up), in
    # bytes_down / bytes_up too: fp32 whatever the links' codecs, so a run shows what they cost.
    Field("bytes_extra_down", int, "bytes of bytes_down sent beside the model (a client algorithm's server "
          "buffers, fp32)", "bytes", null=True, wide=True,
          plots=(Plot("bandwidth", "down: beside the model (fp32)", "#93c5fd", _mb("bytes_extra_down", nonzero=True),
                      kind="bar", rank=1),)),
    Field("bytes_extra_up", int, "bytes of bytes_up sent beside the updates (a client algorithm's returned values, "
          "fp32)", "bytes", null=True, wide=True,
          plots=(Plot("bandwidth", "up: beside the updates (fp32)", "#fdba74", _mb("bytes_extra_up", nonzero=True),
                      kind="bar"),)),
    # A distributed round (compute.ranks > 1): the group that ran it, each rank's training time, and
    # the all-reduce of the round's sums (timed after a barrier, so the ranks' skew is not in it).
    Field("ranks", int, "ranks of the torch.distributed group that ran the round (None: one process)", null=True,
          column=Column("Ranks", rank=4, when="ranks")),
    Field("rank_devices", list[str], "each rank's worker and device, rank 0 first", null=True,
          column=Column("Rank devices", rank=4, when="ranks")),
    Field("rank_train_seconds", list[float], "each rank's seconds of training, rank 0 first", "s", null=True,
          column=Column("Rank train s", 2, rank=4, when="ranks")),
    Field("allreduce_seconds", float, "seconds of the round's all-reduce of its sums", "s", null=True,
          column=Column("All-reduce s", 3, rank=4, when="ranks")),
)  # fmt: skip

BY_NAME = {f.name: f for f in FIELDS}


def _check() -> None:
    """Fail at import, naming the declaration, when one refers to something that is not declared."""
    names = set(BY_NAME)
    for f in FIELDS:
        formulas = [p.formula for p in f.plots if p.formula] + [Formula(s.keys) for s in f.summaries]
        unknown = {k for fo in formulas for k in (*fo.keys, *fo.minus, *([fo.per] if fo.per else []))} - names
        if unknown:
            raise ValueError(f"round field {f.name!r}: its formulas read undeclared fields {sorted(unknown)}")
        bad = [s.key for s in f.summaries if s.aggregate not in AGGREGATES]
        if bad:
            raise ValueError(f"round field {f.name!r}: summaries {bad} need an aggregate among {AGGREGATES}")
    if len(names) != len(FIELDS):
        raise ValueError("round fields: a name is declared twice")


_check()


def plot_formula(field: Field, plot: Plot) -> Formula:
    return plot.formula or Formula((field.name,))


def charts() -> tuple[Chart, ...]:
    """Every chart some field plots on, in CHARTS order, then the fields' own charts (declaration order)."""
    known = {c.id for c in CHARTS}
    own = {}
    for f in FIELDS:
        for p in f.plots:
            if p.chart not in known and p.chart not in own:
                own[p.chart] = Chart(p.chart, f.label[:1].upper() + f.label[1:], f.unit or f.name, optional=f.name)
    return (*CHARTS, *own.values())


def plots_of(chart_id: str) -> list[tuple[Field, Plot]]:
    """The traces of a chart, in (rank, declaration) order."""
    found = [(f, p) for f in FIELDS for p in f.plots if p.chart == chart_id]
    return sorted(found, key=lambda fp: fp[1].rank)


def columns() -> list[tuple[Field, Column]]:
    return sorted(((f, f.column) for f in FIELDS if f.column), key=lambda fc: fc[1].rank)


def summaries() -> list[tuple[Field, Summary]]:
    return sorted(((f, s) for f in FIELDS for s in f.summaries), key=lambda fs: fs[1].rank)


def summary_keys(field: Field, summary: Summary) -> tuple[str, ...]:
    return summary.keys or (field.name,)
