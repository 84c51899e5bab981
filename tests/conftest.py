"""Test set-up.

The current ``anthropic``/``openai`` SDKs send HTTP through httpx2, which respx does not
patch. ``httpx2.alias_httpx()`` makes ``import httpx`` give httpx2 process-wide, so it
must run before anything imports httpx; pytest's own respx plugin is disabled in
``addopts`` (``-p no:respx``) and re-registered here, after the alias.
"""

from __future__ import annotations

import httpx2

httpx2.alias_httpx()

pytest_plugins = ("respx.plugin",)

import os  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402

# A loaded 2-core CI machine makes wall-clock deadlines flaky; they test nothing here.
settings.register_profile(
    "universal-event",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("universal-event")

# ---------------------------------------------------------------------------------------
# Every event the suite builds must validate against the exported JSON Schema.
# Events are sampled at the chokepoints they pass through (adapters, the session log,
# the codec) — a bounded number per type — and validated once at the end of the run.

import functools  # noqa: E402
import importlib  # noqa: E402
from collections import defaultdict  # noqa: E402
from typing import Any  # noqa: E402

import msgspec  # noqa: E402
import pytest  # noqa: E402

import universal_event  # noqa: E402
from universal_event import codec  # noqa: E402
from universal_event.events import EventBase  # noqa: E402

_SAMPLES_PER_TYPE = 300
_seen: dict[str, list[Any]] = defaultdict(list)


def _observe(value: Any) -> None:
    if isinstance(value, EventBase):
        samples = _seen[type(value).__name__]
        if len(samples) < _SAMPLES_PER_TYPE:
            samples.append(msgspec.to_builtins(value))
    elif isinstance(value, list | tuple):
        for item in value[:50]:
            _observe(item)


def _observing(function: Any, *, observe_args: bool) -> Any:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = function(*args, **kwargs)
        if observe_args and args:
            _observe(args[-1] if not isinstance(args[0], EventBase) else args[0])
        _observe(result)
        return result

    return wrapper


for _name in ("encode", "encode_lines", "encode_msgpack", "to_builtins"):
    _wrapped = _observing(getattr(codec, _name), observe_args=True)
    setattr(codec, _name, _wrapped)
    setattr(universal_event, _name, _wrapped)


def _patch_optional(module_name: str, class_name: str, method: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return
    cls = getattr(module, class_name, None)
    if cls is not None and hasattr(cls, method):
        setattr(cls, method, _observing(getattr(cls, method), observe_args=False))


_patch_optional("adapters._base", "Adapter", "make")
_patch_optional("universal_event.log", "SessionLog", "append")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _seen:
        return
    import jsonschema

    from universal_event.schema import event_json_schema

    validator = jsonschema.Draft202012Validator(event_json_schema())
    invalid = []
    for type_name, samples in _seen.items():
        for sample in samples:
            error = jsonschema.exceptions.best_match(validator.iter_errors(sample))
            if error is not None:
                invalid.append(f"{type_name}: {error.message} at {error.json_path}")
                break
    checked = sum(len(samples) for samples in _seen.values())
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"schema check: {checked} events of {len(_seen)} types built by the suite validated"
        )
    if invalid:
        if reporter is not None:
            for line in invalid:
                reporter.write_line(f"schema check FAILED: {line}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
