"""The exported JSON Schema: fresh, valid for every event, and usable outside Python."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings

import universal_event as ue
from tests.strategies import events
from universal_event.cli import main
from universal_event.events import EVENT_TYPES
from universal_event.schema import SCHEMA_FILENAME, event_json_schema, render_schema

ROOT = Path(__file__).resolve().parent.parent
NODE_DIR = ROOT / "tests" / "node"
VALIDATOR = jsonschema.Draft202012Validator(event_json_schema())

INVALID_EVENTS = [
    {"type": "user/message", "content": [{"type": "text"}]},  # text part without text
    {"type": "no/such-type"},
    {"type": "turn/end", "status": "weird"},
    {"type": "tool/result"},  # call_id missing
    {"type": "usage", "usage": {"input_tokens": "12"}},
    {"seq": 1},
]


def test_committed_schema_is_fresh() -> None:
    assert main(["schema", "--check", "--out", str(ROOT / "schemas")]) == 0


def test_check_fails_on_a_stale_schema(tmp_path: Path) -> None:
    (tmp_path / SCHEMA_FILENAME).write_bytes(render_schema().replace(b"user/message", b"user/msg"))
    assert main(["schema", "--check", "--out", str(tmp_path)]) == 1
    assert main(["schema", "--out", str(tmp_path)]) == 0
    assert main(["schema", "--check", "--out", str(tmp_path)]) == 0


def test_schema_has_one_def_per_event_type_and_a_discriminator() -> None:
    schema = event_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert ue.SCHEMA_VERSION in schema["$id"]
    assert schema["discriminator"] == {"propertyName": "type"}
    titles = {ref["$ref"].rsplit("/", 1)[1] for ref in schema["oneOf"]}
    assert titles == {cls.__name__ for cls in EVENT_TYPES.values()}
    for cls in EVENT_TYPES.values():
        definition = schema["$defs"][cls.__name__]
        assert definition["properties"]["type"] == {"const": cls.__struct_config__.tag}
        assert "type" in definition["required"]


@settings(max_examples=150, deadline=None)
@given(events())
def test_generated_events_validate(event: ue.EventBase) -> None:
    VALIDATOR.validate(ue.to_builtins(event))


@pytest.mark.parametrize("invalid", INVALID_EVENTS, ids=lambda e: json.dumps(e)[:40])
def test_invalid_events_are_rejected(invalid: dict[str, object]) -> None:
    assert not VALIDATOR.is_valid(invalid)


def _node_or_skip() -> str:
    node = shutil.which("node")
    installed = (NODE_DIR / "node_modules" / "ajv").is_dir()
    if node is None or not installed:
        if os.environ.get("CI"):
            pytest.fail("node and tests/node/node_modules/ajv are required in CI")
        pytest.skip("node or ajv not installed (scripts/test installs ajv)")
    return node


def test_a_non_python_validator_accepts_the_corpus_and_rejects_bad_events(tmp_path: Path) -> None:
    node = _node_or_skip()
    corpus: list[ue.EventBase] = []

    @settings(max_examples=400, deadline=None, database=None)
    @given(events())
    def collect(event: ue.EventBase) -> None:
        corpus.append(event)

    collect()
    corpus_path = tmp_path / "corpus.jsonl"
    corpus_path.write_bytes(ue.encode_lines(corpus))
    invalid_path = tmp_path / "invalid.jsonl"
    invalid_path.write_text("\n".join(json.dumps(e) for e in INVALID_EVENTS) + "\n")
    result = subprocess.run(
        [
            node,
            str(NODE_DIR / "validate.mjs"),
            str(ROOT / "schemas" / SCHEMA_FILENAME),
            str(corpus_path),
            str(invalid_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    assert summary["valid"] == len(corpus)
    assert summary["rejected"] == len(INVALID_EVENTS)
    assert len({type(e) for e in corpus}) >= 25  # the corpus covers the catalog
