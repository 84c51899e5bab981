"""PostgreSQL store URLs and opening: libpq URIs reach libpq as written, bad ones are
typed errors, and opening an existing store writes nothing (read-only roles, replicas).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

pytest.importorskip("psycopg")

import psycopg
from psycopg.conninfo import conninfo_to_dict

from universal_event.cli import main
from universal_event.errors import StoreError, StoreNotFoundError, StoreURLError
from universal_event.stores import open_store
from universal_event.stores.postgres import PostgresStore, _redact
from universal_event.testing import sample_events

from .conftest import RUN_TAG, new_schema


class _Recorded(PostgresStore):
    """Records what :meth:`PostgresStore.from_url` would open, without connecting."""

    def __init__(self, conninfo: str, **options: Any) -> None:
        self.conninfo = conninfo
        self.options = options


@pytest.mark.parametrize(
    ("url", "libpq", "schema"),
    [
        # An empty host, the host in the query: psql accepts it, so must we.
        ("postgresql:///test?host=127.0.0.1", {"dbname": "test", "host": "127.0.0.1"}, None),
        (
            "postgresql:///test?host=127.0.0.1&schema=s1&port=5432",
            {"dbname": "test", "host": "127.0.0.1", "port": "5432"},
            "s1",
        ),
        (
            "postgresql:///test?host=%2Frun%2Fpostgresql&schema=s1",
            {"dbname": "test", "host": "/run/postgresql"},
            "s1",
        ),
        # Percent-encoded spaces and '=' stay what they mean (not '+').
        (
            "postgresql://u@h:5/db?options=-c%20statement_timeout%3D1&schema=s",
            {"user": "u", "host": "h", "port": "5", "dbname": "db"}
            | {"options": "-c statement_timeout=1"},
            "s",
        ),
        # A literal '+' is a '+' for libpq.
        (
            "postgres://h/db?schema=s&application_name=a+b%2Bc",
            {"host": "h", "dbname": "db", "application_name": "a+b+c"},
            "s",
        ),
        ("postgresql://", {}, None),
        ("postgresql://h/db?sch%65ma=x%5Fy", {"host": "h", "dbname": "db"}, "x_y"),
        (
            "postgresql://u:p%40ss@[::1]:5432/db?schema=s",
            {"user": "u", "password": "p@ss", "host": "::1", "port": "5432", "dbname": "db"},
            "s",
        ),
    ],
)
def test_from_url_passes_libpq_what_was_written(
    url: str, libpq: dict[str, str], schema: str | None
) -> None:
    store = _Recorded.from_url(url)
    assert isinstance(store, _Recorded)
    assert conninfo_to_dict(store.conninfo) == libpq
    assert store.options.get("schema") == schema
    assert "schema" not in store.conninfo.partition("?")[2]


def test_from_url_keeps_an_explicit_schema_option() -> None:
    store = _Recorded.from_url("postgresql://h/db?schema=from_url", schema="given")
    assert isinstance(store, _Recorded)
    assert store.options["schema"] == "given"


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://h/db?schema=Bad-Name", "'Bad-Name'"),
        ("postgresql://h/db?schema=a&schema=b", "'schema' is given twice"),
        ("postgresql://127.0.0.1/test?foo=bar", '"foo"'),
        ("postgresql://127.0.0.1/test?schema=s&foo=bar", '"foo"'),
    ],
)
def test_bad_urls_are_store_url_errors_naming_the_problem(url: str, named: str) -> None:
    """Caught before any connection is made (nothing listens on these hosts' port 1)."""
    with pytest.raises(StoreURLError) as info:
        open_store(url.replace("127.0.0.1", "127.0.0.1:1"))
    assert named in str(info.value)
    assert "\n" not in str(info.value)


def test_a_bad_keyword_conninfo_is_a_store_url_error() -> None:
    with pytest.raises(StoreURLError, match='invalid connection option "bogus"'):
        PostgresStore("host=127.0.0.1 port=1 bogus=1 password=secret")


@pytest.mark.parametrize(
    ("conninfo", "redacted"),
    [
        ("postgresql://u:pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://:pw@h/db", "postgresql://:***@h/db"),
        ("postgresql://u:p?w@h/db", "postgresql://u:***@h/db"),
        ("postgresql://h:5432/db?x=1", "postgresql://h:5432/db?x=1"),
        ("postgresql://h/db?password=sec&x=1", "postgresql://h/db?password=***&x=1"),
        ("postgresql://u@h/db?sslpassword=z", "postgresql://u@h/db?sslpassword=***"),
        ("host=h password='a b' dbname=x", "host=h password=*** dbname=x"),
    ],
)
def test_messages_never_show_a_password(conninfo: str, redacted: str) -> None:
    assert _redact(conninfo) == redacted


def test_cli_reports_a_bad_option_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", "postgresql://127.0.0.1:1/test?foo=bar", "sessions"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("universal-event: error: invalid PostgreSQL connection string")
    assert '"foo"' in err and err.count("\n") == 1


# ---------------------------------------------------------------- against the server


def _query_form(postgres_url: str, **extra: str) -> str:
    """The same server as ``postgresql:///db?host=...&port=...&user=...``."""
    parts = conninfo_to_dict(postgres_url)
    query = {key: str(parts[key]) for key in ("host", "port", "user") if key in parts}
    query.update(extra)
    return f"postgresql:///{parts.get('dbname', '')}?" + "&".join(
        f"{key}={quote(value, safe='')}" for key, value in query.items()
    )


def _schema_exists(postgres_url: str, schema: str) -> bool:
    with psycopg.connect(postgres_url) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
            is not None
        )


def test_host_in_the_query_and_options_reach_the_server(
    postgres_url: str, postgres_schemas: list[str]
) -> None:
    schema = new_schema(postgres_schemas)
    url = _query_form(
        postgres_url, options="-c statement_timeout=4321", application_name="ue a+b", schema=schema
    )
    store = open_store(url)
    try:
        assert isinstance(store, PostgresStore) and store.schema == schema
        store.append("s", sample_events("s", 0, 3), expected_seq=0)
        assert [event.seq for event in store.read("s")] == [0, 1, 2]
        with store._pool.connection() as conn:
            row = conn.execute(
                "SELECT current_setting('statement_timeout'), current_setting('application_name')"
            ).fetchone()
        assert row == ("4321ms", "ue a+b")
    finally:
        store.close()


def _written_schema(
    postgres_url: str, postgres_schemas: list[str], session: str, count: int
) -> str:
    """A new schema holding one session of ``count`` events."""
    schema = new_schema(postgres_schemas)
    store = PostgresStore(postgres_url, schema=schema)
    store.append(session, sample_events(session, 0, count), expected_seq=0)
    store.close()
    return schema


def test_cli_opens_a_query_form_url(
    postgres_url: str, postgres_schemas: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _written_schema(postgres_url, postgres_schemas, "cli", 2)
    assert main(["--store", _query_form(postgres_url, schema=schema), "sessions"]) == 0
    assert "cli" in capsys.readouterr().out


def test_read_only_open_of_a_missing_schema_is_no_store_and_creates_nothing(
    postgres_url: str, postgres_schemas: list[str]
) -> None:
    schema = new_schema(postgres_schemas)
    with pytest.raises(StoreNotFoundError) as info:
        PostgresStore.from_url(f"{postgres_url}?schema={schema}", must_exist=True)
    assert f"schema={schema}" in str(info.value)
    assert not _schema_exists(postgres_url, schema)
    # The same store, once written, opens read-only.
    PostgresStore(postgres_url, schema=schema).close()
    PostgresStore(postgres_url, schema=schema, must_exist=True).close()


def _read_only(postgres_url: str) -> str:
    """The server's URL with every transaction read-only, as on a hot standby."""
    options = quote("-c default_transaction_read_only=on", safe="")
    separator = "&" if "?" in postgres_url else "?"
    return f"{postgres_url}{separator}options={options}"


def test_a_read_replica_opens_an_existing_store(
    postgres_url: str, postgres_schemas: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    schema = _written_schema(postgres_url, postgres_schemas, "r", 4)
    replica = f"{_read_only(postgres_url)}&schema={schema}"
    store = open_store(replica, must_exist=True)
    try:
        assert [info.session_id for info in store.list_sessions()] == ["r"]
        assert len(list(store.read("r"))) == 4
    finally:
        store.close()
    assert main(["--store", replica, "events", "--session", "r"]) == 0
    assert capsys.readouterr().out.count("\n") == 4


def test_a_read_replica_cannot_create_a_store_and_says_so(
    postgres_url: str, postgres_schemas: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    schema = new_schema(postgres_schemas)
    replica = f"{_read_only(postgres_url)}&schema={schema}"
    with pytest.raises(StoreNotFoundError):
        PostgresStore.from_url(replica, must_exist=True)
    with pytest.raises(StoreError, match=f"cannot create schema '{schema}'") as info:
        PostgresStore.from_url(replica)
    assert "read-only transaction" in str(info.value)
    assert not isinstance(info.value, StoreNotFoundError)
    assert not _schema_exists(postgres_url, schema)


@pytest.fixture
def reader_role(postgres_url: str) -> Iterator[str]:
    """A login role that is given only USAGE and SELECT; dropped afterwards."""
    role = f"ue_reader_{RUN_TAG}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
    try:
        yield role
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{role}"')
            conn.execute(f'DROP ROLE "{role}"')


def test_a_read_only_role_reads_and_cannot_create(
    postgres_url: str,
    postgres_schemas: list[str],
    reader_role: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    schema = new_schema(postgres_schemas)
    writer = PostgresStore(postgres_url, schema=schema)
    writer.append("ro", sample_events("ro", 0, 3), expected_seq=0)
    writer.close()
    # PUBLIC has no CREATE on the database by default: the role cannot make a schema.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{reader_role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{reader_role}"')
    as_reader = conninfo_to_dict(postgres_url) | {"user": reader_role}
    base = _query_form(psycopg.conninfo.make_conninfo(**as_reader))
    # Opening for writes too: the schema is current, so opening writes nothing.
    store = open_store(f"{base}&schema={schema}")
    try:
        assert [info.session_id for info in store.list_sessions()] == ["ro"]
    finally:
        store.close()
    assert main(["--store", f"{base}&schema={schema}", "sessions"]) == 0
    assert "ro" in capsys.readouterr().out

    missing = new_schema(postgres_schemas)
    with pytest.raises(StoreError, match=f"cannot create schema '{missing}'") as info:
        open_store(f"{base}&schema={missing}")
    assert "permission denied" in str(info.value)
    assert "\n" not in str(info.value)
    assert not _schema_exists(postgres_url, missing)


def test_cli_read_only_commands_never_create_a_schema(
    postgres_url: str, postgres_schemas: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """README: read-only commands never create a store (a mistyped ``?schema=``)."""
    schema = new_schema(postgres_schemas)
    url = f"{postgres_url}?schema={schema}"
    assert main(["--store", url, "events", "--session", "x"]) == 1
    err = capsys.readouterr().err
    assert f"no session 'x': no store at {url}" in err
    assert main(["--store", url, "sessions"]) == 0
    assert not _schema_exists(postgres_url, schema)


def test_tail_polls_when_the_listen_connection_cannot_be_made(
    postgres_url: str, postgres_schemas: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = new_schema(postgres_schemas)
    store = PostgresStore(postgres_url, schema=schema, poll_interval=0.05)
    try:
        store.append("s", sample_events("s", 0, 2), expected_seq=0)

        def refused(*args: Any, **kwargs: Any) -> Any:
            raise psycopg.OperationalError("connection refused")

        monkeypatch.setattr(psycopg, "connect", refused)  # the pool's connections are open
        assert [e.seq for e in store.tail("s", 0, timeout=1)] == [1]
    finally:
        monkeypatch.undo()
        store.close()
