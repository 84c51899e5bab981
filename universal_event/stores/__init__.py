"""Event stores and ``open_store(url)``.

URLs (the CLI's ``--store``): ``memory:``, ``jsonl:///dir``, ``sqlite:///file.db``,
``postgresql://user@host:port/db``. Backends with optional drivers import lazily.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
from typing import Any

from universal_event.errors import StoreError, StoreNotFoundError, StoreURLError
from universal_event.stores._base import SessionInfo, Store, check_batch
from universal_event.stores.memory import MemoryStore

__all__ = ["DEFAULT_STORE_URL", "MemoryStore", "SessionInfo", "Store", "check_batch", "open_store"]

DEFAULT_STORE_URL = "sqlite:///./.universal-event/sessions.db"
"""The store used when neither ``--store`` nor ``UNIVERSAL_EVENT_STORE`` is given."""

_BACKENDS: dict[str, tuple[str, str]] = {
    "jsonl": ("universal_event.stores.jsonl", "JsonlStore"),
    "sqlite": ("universal_event.stores.sqlite", "SqliteStore"),
    "postgresql": ("universal_event.stores.postgres", "PostgresStore"),
    "postgres": ("universal_event.stores.postgres", "PostgresStore"),
}


def open_store(url: str, *, must_exist: bool = False, **options: Any) -> Store:
    """Open the store a URL names. Each backend class has ``from_url(url, **options)``.

    ``must_exist``: for read-only uses; a file store (``sqlite:``, ``jsonl:``) whose file
    or directory is missing, or a PostgreSQL schema that was never made, raises
    :class:`~universal_event.errors.StoreNotFoundError` instead of being created empty.
    """
    scheme, colon, rest = url.partition(":")
    scheme = scheme.lower()  # URL schemes are case-insensitive (RFC 3986, 3.1)
    url = scheme + colon + rest
    if url in ("memory:", "memory://"):
        return MemoryStore.from_url(url)
    if scheme not in _BACKENDS:
        raise StoreURLError(
            f"unknown store URL {url!r}: expected memory:, jsonl:///dir, "
            "sqlite:///file or postgresql://..."
        )
    module_name, class_name = _BACKENDS[scheme]
    backend = getattr(importlib.import_module(module_name), class_name)
    path_of = getattr(backend, "path_of", None)
    if must_exist and path_of is not None:
        path = path_of(url)
        if path != ":memory:" and not os.path.exists(path):
            raise StoreNotFoundError(url)
    elif must_exist:  # a server store: the backend looks
        options["must_exist"] = True
    try:
        store: Store = backend.from_url(url, **options)
    except StoreError:
        raise
    except (OSError, ValueError, sqlite3.Error) as exc:  # a directory, a bad path or host
        raise StoreError(f"cannot open store {url!r}: {exc}") from exc
    return store
