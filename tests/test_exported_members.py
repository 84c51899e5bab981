"""The public face: ``__all__`` lists exactly the public names, and each resolves."""

from __future__ import annotations

import universal_event


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
