"""The public face: ``__all__`` lists exactly the public names, and each resolves."""

from __future__ import annotations

from types import ModuleType

import pytest

import universal_event
from universal_event import errors, events, messages, parts


def test_all_lists_every_public_name() -> None:
    public = {
        name
        for name in dir(universal_event)
        if not name.startswith("_")
        and not isinstance(getattr(universal_event, name), type(universal_event))
    }
    assert public == set(universal_event.__all__)


def test_every_exported_name_resolves() -> None:
    for name in universal_event.__all__:
        assert getattr(universal_event, name) is not None


@pytest.mark.parametrize(
    "module", [events, parts, messages, errors], ids=lambda module: module.__name__
)
def test_schema_modules_export_every_public_class(module: ModuleType) -> None:
    """``from universal_event.events import *`` gives every event class defined there."""
    defined = {
        name
        for name, value in vars(module).items()
        if isinstance(value, type) and value.__module__ == module.__name__ and name[0] != "_"
    }
    assert defined <= set(module.__all__)
