"""Every column of the runs table, by the name the query, the URL and the API use: the run's own
fields (name, status, owner, team, sweep, tags, created...), its summaries (the round fields'
``Summary`` declarations, kept per run by ``run_summary``), the "to target" figures, any spec
field (``local.lr``, ``algorithm.client.name``...) and any custom metric of an external run
(``custom.<name>.last|min|max``).

A ``Vocabulary`` is the set a user's query may name: the columns above, the spec fields of the
spec schema (every registered component's options included) and those seen in the configs of
the external runs the user may read. An unknown name is refused with the nearest known one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

from fedweb_engine.components import registry
from fedweb_engine.spec.components import COMPONENT_PATHS
from fedweb_engine.spec.schema import Spec
from orchestrator.experiments.models import Kind, Status
from orchestrator.experiments.specs import flatten
from orchestrator.experiments.summaries import METRICS
from orchestrator.runs.query import QueryError, suggest
from orchestrator.runs.run_summary import BY_KEY, COSTS

NUMBER, TEXT, CHOICE, DATE, TAGS, SPEC, CUSTOM = "number", "text", "choice", "date", "tags", "spec", "custom"
RUN, SUMMARY, TARGET, SPEC_SECTION, CUSTOM_SECTION = "run", "summary", "target", "spec", "custom"
CUSTOM_FOLDS = ("last", "min", "max")  # RunSummary.custom's [last, min, max]
SPEC_PREFIX = "spec."  # reaches a config key that a run column's name hides (an external run's "status")
MAX_CUSTOM_NAMES = 500


@dataclass(frozen=True)
class Column:
    name: str  # as the query, the URL and the API name it
    label: str  # the table's heading
    kind: str  # NUMBER, TEXT, CHOICE, DATE, TAGS, SPEC or CUSTOM
    section: str  # the column picker's: RUN, SUMMARY, TARGET, SPEC_SECTION, CUSTOM_SECTION
    path: str = ""  # the ORM path (run and summary columns), the TargetStep field, the spec's dotted path
    doc: str = ""
    scale: float = 1.0  # the query and the table read stored values divided by this (bytes -> MB)
    digits: int | None = None
    unit: str = ""
    choices: tuple[str, ...] = ()
    groupable: bool = True

    @property
    def to_target(self) -> bool:
        """A "to target" figure: read at the first round that reached the view's target accuracy."""
        return self.section == TARGET

    @property
    def numeric(self) -> bool:
        return self.kind in (NUMBER, CUSTOM)

    @property
    def keys(self) -> tuple[str | int, ...]:
        """The path inside the JSON column (spec fields and custom metrics)."""
        if self.kind == CUSTOM:
            return (self.path, CUSTOM_FOLDS.index(self.name.rsplit(".", 1)[1]))
        return tuple(self.path.split("."))


RUN_COLUMNS = (
    Column("id", "#", NUMBER, RUN, "pk", "The run's number", digits=0),
    Column("name", "Name", TEXT, RUN, "name", groupable=False),
    Column("description", "Description", TEXT, RUN, "description", groupable=False),
    Column("notes", "Notes", TEXT, RUN, "notes", "The run's Markdown notes", groupable=False),
    Column("status", "Status", CHOICE, RUN, "status", choices=tuple(Status.values)),
    Column("kind", "Kind", CHOICE, RUN, "kind", "native (FedWeb ran it) or external (a script reported it)",
           choices=tuple(Kind.values)),
    Column("owner", "Owner", TEXT, RUN, "owner__username"),
    Column("team", "Team", TEXT, RUN, "team__name"),
    Column("sweep", "Sweep", NUMBER, RUN, "sweep_id", "The sweep it is a run of (its number; null: none)", digits=0),
    Column("tag", "Tags", TAGS, RUN, "tags", "tag:x keeps the runs tagged x", groupable=False),
    Column("created", "Created", DATE, RUN, "created", groupable=False),
    Column("finished", "Finished", DATE, RUN, "finished", groupable=False),
    Column("round", "Round", NUMBER, RUN, "current_round", "Rounds done so far", digits=0),
    Column("total_rounds", "Total rounds", NUMBER, RUN, "total_rounds", digits=0),
)  # fmt: skip
# A summary's column is named by its key, but "bytes", which the table shows, filters and returns in MB.
_SUMMARY_NAMES = {"bytes": "mb"}
SUMMARY_COLUMNS = tuple(
    Column(_SUMMARY_NAMES.get(m.key, m.key), m.label, NUMBER, SUMMARY, f"summary__{m.key}", m.title, m.scale,
           m.digits, m.unit)
    for m in METRICS
)  # fmt: skip
# The first round at or above the view's target accuracy, and what the run had spent by then.
_TARGET_NAMES = {"seconds": ("seconds_to_target", "Seconds to target"), "bytes": ("mb_to_target", "MB to target"),
                 "epsilon": ("epsilon_at_target", "ε at target")}  # fmt: skip
TARGET_COLUMNS = (
    Column("rounds_to_target", "Rounds to target", NUMBER, TARGET, "round",
           "The first round whose test accuracy reached the target", digits=0),
    *(Column(*_TARGET_NAMES[k], NUMBER, TARGET, k, f"{BY_KEY[k].title}, by that round", BY_KEY[k].scale,
             BY_KEY[k].digits, BY_KEY[k].unit) for k in COSTS),
)  # fmt: skip
FIXED = {c.name: c for c in (*RUN_COLUMNS, *SUMMARY_COLUMNS, *TARGET_COLUMNS)}
# What a new user's table shows (the picker adds any other): the summaries but the least read ones.
DEFAULT_COLUMNS = ("status", "round", *(c.name for c in SUMMARY_COLUMNS if c.name not in ("best_loss", "rounds")),
                   "tag", "owner", "created")  # fmt: skip
TEXT_SEARCH = ("name", "description", "tag")  # what a bare word looks in


def spec_column(path: str) -> Column:
    return Column(path, path, SPEC, SPEC_SECTION, path.removeprefix(SPEC_PREFIX))


def custom_column(name: str) -> Column:
    metric, fold = name.removeprefix("custom.").rsplit(".", 1)
    return Column(
        name, f"{metric} ({fold})", CUSTOM, CUSTOM_SECTION, metric, f"The {fold} value an external run reported"
    )


@lru_cache(maxsize=8)
def _schema_fields(components: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    fields = set(flatten(Spec.from_dict({}).to_dict()))
    for path, kind in COMPONENT_PATHS.items():
        for name in dict(components).get(kind, "").split(","):
            if name:
                options = registry.get(kind, name).options
                fields.update(f"{path}.options.{f.name}" for f in dataclasses.fields(options))
    fields.update(f"{path}.name" for path in COMPONENT_PATHS)
    return tuple(sorted(fields))


def schema_fields() -> tuple[str, ...]:
    """The dotted fields of a native spec, with the options of every registered component."""
    kinds = sorted(set(COMPONENT_PATHS.values()))
    return _schema_fields(tuple((kind, ",".join(registry.names(kind))) for kind in kinds))


class Vocabulary:
    """The names a query may use: the fixed columns, spec fields and custom metrics."""

    def __init__(self, spec_fields=(), custom_metrics=()):
        self.spec = sorted({*schema_fields(), *spec_fields})
        metrics = sorted(set(custom_metrics))[:MAX_CUSTOM_NAMES]
        self.custom = [f"custom.{m}.{fold}" for m in metrics for fold in CUSTOM_FOLDS]

    def names(self) -> list[str]:
        return [*FIXED, *[s for s in self.spec if s not in FIXED], *self.custom]

    def get(self, name: str) -> Column:
        if name in FIXED:
            return FIXED[name]
        bare = name.removeprefix(SPEC_PREFIX)
        if bare in self.spec:
            return spec_column(name)
        if name in self.custom:
            return custom_column(name)
        raise QueryError(f'unknown field "{name}"{suggest(name, self.names())}')
