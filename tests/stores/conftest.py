"""Store fixtures: one factory per backend (memory, jsonl, sqlite, postgresql).

PostgreSQL runs against 127.0.0.1:5432, database ``test`` (override with
``UNIVERSAL_EVENT_TEST_POSTGRES_URL``). Every store gets its own schema, named for this
run, and every such schema is dropped at the end. When the server is unreachable the
PostgreSQL tests are skipped, unless ``UNIVERSAL_EVENT_REQUIRE_POSTGRES=1`` (CI), where
they fail.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from universal_event.stores import MemoryStore, Store

POSTGRES_URL = os.environ.get(
    "UNIVERSAL_EVENT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
RUN_TAG = f"{os.getpid()}_{uuid.uuid4().hex[:6]}"
BACKENDS = ["memory", "jsonl", "sqlite", "postgresql"]
DURABLE_BACKENDS = ["jsonl", "sqlite", "postgresql"]


@dataclass
class StoreKit:
    """How to make an empty store of one backend, and reopen the same data."""

    backend: str
    make: Callable[[], Store]
    reopen: Callable[[Store], Store] | None
    """Close a store and open its data again (durable backends only)."""
    url_of: Callable[[Store], str] = field(default=lambda store: "memory:")
    """A URL ``open_store`` understands for the same data (another process can use it)."""


def _postgres_reachable() -> str | None:
    """None when the server answers, else why not."""
    import psycopg

    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return str(exc)
    return None


@pytest.fixture(scope="session")
def postgres_schemas() -> Iterator[list[str]]:
    """Schemas created by this run; all dropped when the run ends."""
    created: list[str] = []
    yield created
    if not created:
        return
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        for schema in created:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The server URL, or skip/fail (CI) when it is unreachable."""
    problem = _postgres_reachable()
    if problem is not None:
        message = f"PostgreSQL at {POSTGRES_URL} is unreachable: {problem}"
        if os.environ.get("UNIVERSAL_EVENT_REQUIRE_POSTGRES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return POSTGRES_URL


_counter = itertools.count()


def new_schema(postgres_schemas: list[str]) -> str:
    schema = f"ue_test_{RUN_TAG}_{next(_counter)}"
    postgres_schemas.append(schema)
    return schema


def make_kit(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    counter = itertools.count()
    if backend == "memory":
        return StoreKit("memory", MemoryStore, None)
    if backend == "jsonl":
        from universal_event.stores.jsonl import JsonlStore

        def reopen_jsonl(store: Store) -> Store:
            assert isinstance(store, JsonlStore)
            store.close()
            return JsonlStore(store.directory)

        return StoreKit(
            "jsonl",
            lambda: JsonlStore(tmp_path / f"jsonl-{next(counter)}"),
            reopen_jsonl,
            lambda store: f"jsonl://{store.directory}",  # type: ignore[attr-defined]
        )
    if backend == "sqlite":
        from universal_event.stores.sqlite import SqliteStore

        def reopen_sqlite(store: Store) -> Store:
            assert isinstance(store, SqliteStore)
            store.close()
            return SqliteStore(store.path)

        return StoreKit(
            "sqlite",
            lambda: SqliteStore(tmp_path / f"store-{next(counter)}.db"),
            reopen_sqlite,
            lambda store: f"sqlite://{store.path}",  # type: ignore[attr-defined]
        )
    assert backend == "postgresql"
    url = request.getfixturevalue("postgres_url")
    schemas = request.getfixturevalue("postgres_schemas")
    from universal_event.stores.postgres import PostgresStore

    def reopen_postgres(store: Store) -> Store:
        assert isinstance(store, PostgresStore)
        store.close()
        return PostgresStore(url, schema=store.schema)

    return StoreKit(
        "postgresql",
        lambda: PostgresStore(url, schema=new_schema(schemas), max_size=4),
        reopen_postgres,
        lambda store: f"{url}?schema={store.schema}",  # type: ignore[attr-defined]
    )


@pytest.fixture(params=BACKENDS)
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    return make_kit(request.param, request, tmp_path)


@pytest.fixture(params=DURABLE_BACKENDS)
def durable_kit(request: pytest.FixtureRequest, tmp_path: Path) -> StoreKit:
    return make_kit(request.param, request, tmp_path)
