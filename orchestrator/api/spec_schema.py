"""The experiment spec in the OpenAPI document, built from the engine's field metadata and the
component registry each time the schema is served, so a plugin's components and their options
appear in it as soon as the server has loaded the plugin.

A component section (``model``, ``data``, ``algorithm``, ``communication.uplink``/``downlink``)
gets a ``name`` enum of the registered components and an ``options`` object that is ``anyOf`` the
per-component options schemas (``model.resnet_small.options``), each a named component schema with
its defaults, bounds and help texts. ``anyOf`` rather than a discriminated ``oneOf``: ``name`` has a
default, so it may be absent, and several components' options (all optional) match ``{}``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent

from fedweb_engine.components import registry
from fedweb_engine.spec.schema import COMPONENT_PATHS, spec_fields

JSON_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string", "list": "array"}
SPEC_DESCRIPTION = (
    "The experiment spec; every field has a default. Components (model, dataset, strategy, codecs) "
    "are picked by `name` and configured by `options`. Old flat specs (`data.dataset`, `model.hidden`, "
    "`communication.topk_ratio`, ...) are still accepted and upgraded to this shape."
)


def field_schema(meta: dict[str, Any]) -> dict[str, Any]:
    """One spec field (or component option) as an OpenAPI 3.0 schema: type, enum, bounds, default, help."""
    kind = JSON_TYPES[meta["type"]]
    schema: dict[str, Any] = {"type": kind, "description": meta["help"]}
    if kind == "array":
        schema["items"] = {"type": "integer"}
    if meta["choices"]:
        schema["enum"] = list(meta["choices"])
    if meta["min"] is not None:
        schema["minimum"] = meta["min"]
        if meta["min_open"]:
            schema["exclusiveMinimum"] = True
    if meta["max"] is not None:
        schema["maximum"] = meta["max"]
    if meta["max_length"] is not None:
        schema["maxItems" if kind == "array" else "maxLength"] = meta["max_length"]
    if meta["nullable"]:
        schema["nullable"] = True
    schema["default"] = meta["default"]
    if meta["applies_when"]:
        alternatives = [
            " and ".join(f"{f} is {' or '.join(map(str, values))}" for f, values in alt.items())
            for alt in meta["applies_when"]
        ]
        schema["description"] += f" Applies when {'; or when '.join(alternatives)}."
    return schema


def options_component_name(kind: str, name: str) -> str:
    return f"{kind}.{name}.options"


def component_options_schemas() -> dict[str, dict[str, Any]]:
    """Every registered component's options schema, by :func:`options_component_name`."""
    by_component: dict[tuple[str, str], dict[str, Any]] = {}
    fields = spec_fields()
    for path, kind in COMPONENT_PATHS.items():
        for component in registry.components(kind):
            key = (kind, component.name)
            if key in by_component:  # uplink and downlink share the codecs
                continue
            origin = f" From plugin {component.plugin}." if component.plugin else ""
            by_component[key] = {
                "type": "object",
                "title": f"{component.name} ({kind})",
                "description": f"Options of {kind} {component.name}. {component.help}{origin}".strip(),
                "properties": {},
                "additionalProperties": False,
            }
            prefix = f"{path}.options.{component.name}."
            for dotted, meta in fields.items():
                if dotted.startswith(prefix) and meta.get("option"):
                    option = field_schema({**meta, "applies_when": None})  # implied by the component
                    by_component[key]["properties"][meta["option"]] = option
    return {options_component_name(kind, name): schema for (kind, name), schema in by_component.items()}


def spec_schema() -> dict[str, Any]:
    """The whole spec as a nested object schema; options refer to :func:`component_options_schemas`."""
    root: dict[str, Any] = {"type": "object", "description": SPEC_DESCRIPTION, "properties": {}}
    for dotted, meta in spec_fields().items():
        if meta.get("option"):
            continue
        *parents, leaf = dotted.split(".")
        node = root
        for part in parents:
            node = node["properties"].setdefault(part, {"type": "object", "properties": {}})
        node["properties"][leaf] = field_schema(meta)
    for path, kind in COMPONENT_PATHS.items():
        node = root
        for part in path.split("."):
            node = node["properties"][part]
        refs = [
            {"$ref": f"#/components/schemas/{options_component_name(kind, c.name)}"} for c in registry.components(kind)
        ]
        node["properties"]["options"] = {
            "type": "object",
            "description": f"Options of the {kind} `name` picks (see each {kind}'s schema); "
            "omitted options take their defaults.",
            "anyOf": refs,
        }
    return root


class SpecFieldExtension(OpenApiSerializerFieldExtension):
    """Documents :class:`orchestrator.api.serializers.SpecField` as the ``ExperimentSpec`` schema."""

    target_class = "orchestrator.api.serializers.SpecField"

    def get_name(self) -> str:
        return "ExperimentSpec"

    def map_serializer_field(self, auto_schema, direction) -> dict[str, Any]:
        for name, schema in component_options_schemas().items():
            component = ResolvedComponent(name, ResolvedComponent.SCHEMA, object=name, schema=schema)
            auto_schema.registry.register_on_missing(component)
        return spec_schema()
