"""JSON Schema export of the Universal Event, for consumers in other languages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from universal_event.events import SCHEMA_VERSION, Event

__all__ = ["SCHEMA_FILENAME", "event_json_schema", "render_schema", "write_schema"]

SCHEMA_FILENAME = "universal-event.schema.json"


def event_json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of one Universal Event."""
    schema: dict[str, Any] = msgspec.json.schema(Event)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://universal-event.dev/schema/{SCHEMA_VERSION}/universal-event.schema.json",
        "title": "Universal Event",
        "description": "One event of a universal-event session log.",
        "x-schema-version": SCHEMA_VERSION,
        **schema,
    }


def render_schema() -> bytes:
    """The schema file's exact bytes (stable key order, trailing newline)."""
    encoded = msgspec.json.encode(event_json_schema(), order="sorted")
    return msgspec.json.format(encoded, indent=2) + b"\n"


def write_schema(directory: Path) -> Path:
    """Write the schema file into ``directory``; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SCHEMA_FILENAME
    path.write_bytes(render_schema())
    return path
