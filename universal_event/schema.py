"""JSON Schema export of the Universal Event, for consumers in other languages."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import msgspec

from universal_event.events import SCHEMA_VERSION, Event

__all__ = ["SCHEMA_FILENAME", "event_json_schema", "render_schema", "write_schema"]

SCHEMA_FILENAME = "universal-event.schema.json"


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of one Universal Event.

    msgspec emits tagged unions as ``anyOf`` plus an OpenAPI ``discriminator`` with a
    ``mapping``, which strict validators refuse (ajv: "unknown keyword: discriminator";
    its discriminator option refuses ``mapping``). We export the form both accept:
    ``oneOf`` over ``$ref``s, ``discriminator: {propertyName: "type"}`` without a
    mapping, and each variant's tag as a required ``const``. Validators that do not
    know ``discriminator`` ignore it; ``oneOf`` is exact because tags are distinct.
    """
    schema = _const_tags(_strict_unions(msgspec.json.schema(Event)))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://universal-event.dev/schema/{SCHEMA_VERSION}/universal-event.schema.json",
        "title": f"Universal Event {SCHEMA_VERSION}",
        "description": "One event of a universal-event session log.",
        "$comment": f"schema version {SCHEMA_VERSION}",
        **schema,
    }


def _strict_unions(node: Any) -> Any:
    """Rewrite msgspec's tagged unions and tag enums into the strict-validator form."""
    if isinstance(node, list):
        return [_strict_unions(item) for item in node]
    if not isinstance(node, dict):
        return node
    result = {key: _strict_unions(value) for key, value in node.items()}
    if isinstance(result.get("description"), str):
        # msgspec < 0.23 keeps docstring indentation, 0.23 dedents: same file either way
        result["description"] = inspect.cleandoc(result["description"])
    discriminator = result.get("discriminator")
    if isinstance(discriminator, dict) and "anyOf" in result:
        result["oneOf"] = result.pop("anyOf")
        result["discriminator"] = {"propertyName": discriminator["propertyName"]}
        result["type"] = "object"  # ajv strictTypes wants it beside a discriminator
    return result


def _const_tags(schema: dict[str, Any]) -> dict[str, Any]:
    """Each tagged struct's ``{"enum": [tag]}`` becomes ``{"const": tag}``."""
    for definition in schema.get("$defs", {}).values():
        properties = definition.get("properties", {})
        for tag_field in ("type", "role"):
            tag = properties.get(tag_field)
            if isinstance(tag, dict) and list(tag) == ["enum"] and len(tag["enum"]) == 1:
                properties[tag_field] = {"const": tag["enum"][0]}
    return schema


def render_schema() -> bytes:
    """The schema file's exact bytes (stable key order, trailing newline)."""
    encoded = msgspec.json.encode(event_json_schema(), order="sorted")
    return msgspec.json.format(encoded, indent=2) + b"\n"


def write_schema(directory: Path) -> Path:
    """Write the schema file into ``directory``; returns its path."""
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(
            20, "the schema goes into a directory; this is a file", str(directory)
        )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SCHEMA_FILENAME
    path.write_bytes(render_schema())
    return path
