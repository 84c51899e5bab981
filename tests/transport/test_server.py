"""The control plane over HTTP on loopback: writes, reads, errors, auth, resume, overflow."""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.transport._support import ResumingClient, ServerThread, post_events, user_events
from universal_event.codec import encode, encode_lines
from universal_event.events import RequestHeaderEvent, UserMessageEvent
from universal_event.parts import TextPart
from universal_event.server import Limits, Tokens, create_app
from universal_event.sse import SSEEventDecoder
from universal_event.stores import MemoryStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "recorded"

WRITER = "writer-token-0123456789"
READER = "reader-token-0123456789"
OTHER = "other-session-token-0123"
ADMIN = "admin-token-0123456789ab"
TOKENS = Tokens.parse(
    f"""
    {WRITER} s1 write
    {READER} s1 read
    {OTHER}  s2 read,write
    {ADMIN}  *  read
    """
)


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def dev_server(store: MemoryStore) -> Iterator[ServerThread]:
    with ServerThread(create_app(store, tokens=None, keepalive=0.5)) as server:
        yield server


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10) as client:
        yield client


def _read_all(http: httpx.Client, base: str, session: str, **params: str) -> list[dict]:
    response = http.get(f"{base}/sessions/{session}/events", params={"follow": "0", **params})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    decoder = SSEEventDecoder()
    return [json.loads(message.data) for message in decoder.feed(response.content)]


# ---------------------------------------------------------------- writes and reads


def test_posted_events_come_back_in_order_and_a_retry_adds_nothing(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    events = user_events(20, prefix="a")
    first = post_events(http, dev_server.url, "s1", events)
    assert first.json() == {"appended": 20, "duplicates": 0, "first_seq": 0, "last_seq": 19}
    retry = post_events(http, dev_server.url, "s1", events)
    assert retry.json() == {"appended": 0, "duplicates": 20}
    overlapping = post_events(http, dev_server.url, "s1", events[15:] + user_events(3, prefix="b"))
    assert overlapping.json() == {"appended": 3, "duplicates": 5, "first_seq": 20, "last_seq": 22}
    assert store.latest_seq("s1") == 22
    received = _read_all(http, dev_server.url, "s1")
    assert [e["seq"] for e in received] == list(range(23))
    assert [e["id"] for e in received] == [f"a-{i}" for i in range(20)] + ["b-0", "b-1", "b-2"]
    assert all(e["session_id"] == "s1" and e["ts"] > 0 for e in received)


def test_json_array_and_single_object_bodies(dev_server: ServerThread, http: httpx.Client) -> None:
    events = user_events(3, prefix="arr")
    array = b"[" + b",".join(encode(e) for e in events) + b"]"
    response = http.post(f"{dev_server.url}/sessions/s1/events", content=array)
    assert response.json()["appended"] == 3
    single = json.dumps(json.loads(encode(user_events(1, prefix="one")[0])), indent=2)
    response = http.post(
        f"{dev_server.url}/sessions/s1/events",
        content=single,
        headers={"content-type": "application/json"},
    )
    assert response.json()["appended"] == 1
    assert [e["id"] for e in _read_all(http, dev_server.url, "s1")] == [
        "arr-0",
        "arr-1",
        "arr-2",
        "one-0",
    ]


def test_events_without_ids_are_idempotent_by_body_and_by_key(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    body = encode_lines([UserMessageEvent(content=[TextPart(text="hi")])] * 2)
    url = f"{dev_server.url}/sessions/s1/events"
    assert http.post(url, content=body).json()["appended"] == 2
    assert http.post(url, content=body).json() == {"appended": 0, "duplicates": 2}
    keyed = {"Idempotency-Key": "turn-7"}
    assert http.post(url, content=body, headers=keyed).json()["appended"] == 2
    assert http.post(url, content=body, headers=keyed).json()["appended"] == 0
    assert store.latest_seq("s1") == 3


def test_an_idempotency_key_sent_again_with_another_body_is_refused_not_half_applied(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    url = f"{dev_server.url}/sessions/s1/events"
    keyed = {"Idempotency-Key": "turn-8"}
    two = encode_lines([UserMessageEvent(content=[TextPart(text=t)]) for t in ("a", "b")])
    three = encode_lines([UserMessageEvent(content=[TextPart(text=t)]) for t in "xyz"])
    assert http.post(url, content=two, headers=keyed).json()["appended"] == 2
    refused = http.post(url, content=three, headers=keyed)
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    assert "turn-8" in refused.json()["error"]["message"]
    assert store.latest_seq("s1") == 1  # nothing of the second body
    assert http.post(url, content=two, headers=keyed).json() == {"appended": 0, "duplicates": 2}
    # another key, or no key, with that body is a new request
    assert http.post(url, content=three, headers={"Idempotency-Key": "turn-9"}).status_code == 200
    assert store.latest_seq("s1") == 4


def test_a_reused_key_is_recognised_by_another_process_from_the_stored_ids(
    store: MemoryStore,
) -> None:
    from universal_event.server._ingest import Limits, parse_body
    from universal_event.server._writer import IdempotencyKeyReused, SessionWriters

    def parsed(text: str) -> Any:
        body = encode_lines([UserMessageEvent(content=[TextPart(text=text)])])
        return parse_body(
            body,
            session_id="s2",
            runtime=None,
            content_type="",
            idempotency_key="k~1-2",  # the separators may appear in a key
            limits=Limits(),
        )

    first = parsed("one")
    SessionWriters(store).append("s2", first.events, idempotency_key=first.idempotency_key)
    other_process = SessionWriters(store)  # knows only what the store holds
    again = parsed("two")
    with pytest.raises(IdempotencyKeyReused):
        other_process.append("s2", again.events, idempotency_key=again.idempotency_key)
    retry = other_process.append("s2", first.events, idempotency_key=first.idempotency_key)
    assert (retry.appended, retry.duplicates) == ([], 1)


def test_writers_let_go_of_sessions_written_least_recently_and_stay_idempotent(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-running server held the ids of every session it had ever written to: past
    the bounds, the least recently written are let go, and read again from the store
    at their next append (a retry there still adds nothing)."""
    from tests.transport._support import user_events
    from universal_event.server import _writer
    from universal_event.server._writer import SessionWriters

    monkeypatch.setattr(_writer, "MAX_HELD_IDS", 25)
    monkeypatch.setattr(_writer, "_BOUNDS_CHECKED_EVERY", 1)
    writers = SessionWriters(store)
    for index in range(10):
        assert len(writers.append(f"s{index}", user_events(10, prefix=f"s{index}")).appended) == 10
        assert sum(len(state.ids) for state in writers._states.values()) <= 25 + 10
    assert "s0" not in writers._states and "s9" in writers._states
    retry = writers.append("s0", user_events(12, prefix="s0"))
    assert (len(retry.appended), retry.duplicates) == (2, 10)
    assert [e.seq for e in retry.appended] == [10, 11]
    monkeypatch.setattr(_writer, "MAX_HELD_SESSIONS", 3)
    writers.append("s5", user_events(1, prefix="s5"))
    assert len(writers._states) <= 3 and "s5" in writers._states


def test_a_malformed_idempotency_key_is_refused(
    dev_server: ServerThread, http: httpx.Client
) -> None:
    body = encode_lines([UserMessageEvent(content=[TextPart(text="hi")])])
    url = f"{dev_server.url}/sessions/s1/events"
    for key in ("has space", "x" * 201):
        response = http.post(url, content=body, headers={"Idempotency-Key": key})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "bad_idempotency_key"


def test_resume_with_last_event_id_header_and_after_param(
    dev_server: ServerThread, http: httpx.Client
) -> None:
    post_events(http, dev_server.url, "s1", user_events(10, prefix="r"))
    url = f"{dev_server.url}/sessions/s1/events"
    by_header = http.get(url, params={"follow": "0"}, headers={"Last-Event-ID": "6"})
    assert [m.id for m in SSEEventDecoder().feed(by_header.content)] == ["7", "8", "9"]
    assert [e["seq"] for e in _read_all(http, dev_server.url, "s1", after="8")] == [9]
    # the header (the transport's memory) wins over the URL's ?after
    both = http.get(url, params={"follow": "0", "after": "2"}, headers={"Last-Event-ID": "8"})
    assert [m.id for m in SSEEventDecoder().feed(both.content)] == ["9"]


def test_native_events_from_a_runtime_are_normalised_and_a_retry_adds_nothing(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    fixture = json.loads(
        (FIXTURES / "anthropic-messages/stream_client_tool_two_turns.json").read_text()
    )
    stream = fixture["interactions"][0]["response_body"].encode()
    url = f"{dev_server.url}/sessions/native/events?from=anthropic"
    first = http.post(url, content=stream).json()
    assert first["appended"] > 3
    assert http.post(url, content=stream).json() == {"appended": 0, "duplicates": first["appended"]}
    stored = list(store.read("native"))
    types = [e.__struct_config__.tag for e in stored]
    assert "assistant/message" in types and "assistant/chunk" in types
    assert all(e.source is not None and e.source.runtime == "anthropic" for e in stored)


def test_a_native_transcript_that_branches_is_posted_whole(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    """The adapter names a branch's replace by its own event ids; the server gives the
    events other ids, and the replace follows them (stored by seqs)."""
    from tests.adapters._render_support import derived_texts
    from universal_event.log import SessionLog

    transcript = FIXTURES.parent / "captured" / "claude_chains" / "resume_at"
    body = (transcript / "session_transcript.jsonl").read_bytes()
    url = f"{dev_server.url}/sessions/b1/events?from=claude-code-transcript"
    answer = http.post(url, content=body)
    assert answer.status_code == 200, answer.text
    texts = [text for _, text in derived_texts(SessionLog.open(store, "b1"))]
    assert texts == [
        "First question",
        "Turn one done: one.",
        "Branch question after rewinding",
        "Branch answer after rewinding.",
    ]


def _anthropic_turn(http: httpx.Client, base: str, session: str) -> str:
    """A recorded Anthropic turn posted to ``session``: a header for ``claude-x``, the
    prompt as universal events, the response as its native SSE stream; the prompt."""
    fixture = json.loads(
        (FIXTURES / "anthropic-messages/stream_client_tool_two_turns.json").read_text()
    )
    prompt: str = fixture["interactions"][0]["request_body"]["messages"][0]["content"][0]["text"]
    post_events(
        http,
        base,
        session,
        [
            RequestHeaderEvent(id="h0", provider="anthropic", api="messages", model="claude-x"),
            UserMessageEvent(id="u0", content=[TextPart(text=prompt)]),
        ],
    )
    stream = fixture["interactions"][0]["response_body"].encode()
    http.post(f"{base}/sessions/{session}/events?from=anthropic", content=stream)
    return prompt


def test_messages_and_render_endpoints(dev_server: ServerThread, http: httpx.Client) -> None:
    prompt = _anthropic_turn(http, dev_server.url, "m1")
    messages = http.get(f"{dev_server.url}/sessions/m1/messages")
    assert messages.status_code == 200, messages.text
    roles = [m.get("role") for m in messages.json()]
    assert roles[:2] == ["user", "assistant"]
    rendered = http.get(f"{dev_server.url}/sessions/m1/render", params={"to": "anthropic"})
    assert rendered.status_code == 200, rendered.text
    assert rendered.json()["model"] == "claude-x"
    assert rendered.json()["messages"][0]["content"][0]["text"] == prompt
    bad = http.get(f"{dev_server.url}/sessions/m1/render", params={"to": "cobol"})
    assert bad.status_code == 400 and "cobol" in bad.json()["error"]["message"]
    missing = http.get(f"{dev_server.url}/sessions/nobody/messages")
    assert missing.status_code == 404


def test_render_takes_a_model_and_gives_its_warnings(
    dev_server: ServerThread, http: httpx.Client
) -> None:
    """A session of another provider's replies (no header for the target) renders with
    ``?model=``; the count of warnings is a header, the warnings themselves come with
    ``&warnings=1`` (a renamed tool's names are needed to map a response back)."""
    _anthropic_turn(http, dev_server.url, "r1")
    url = f"{dev_server.url}/sessions/r1/render"
    plain = http.get(url, params={"to": "openai-chat", "model": "gpt-5"})
    assert plain.status_code == 200, plain.text
    assert plain.json()["model"] == "gpt-5"
    count = int(plain.headers["Universal-Event-Warning-Count"])
    assert count > 0  # the thinking of another provider, dropped
    listed = http.get(url, params={"to": "openai-chat", "model": "gpt-5", "warnings": "1"})
    body = listed.json()
    assert body["request"] == plain.json()
    assert len(body["warnings"]) == count
    assert {"code", "message"} <= set(body["warnings"][0])
    same = http.get(url, params={"to": "anthropic"})
    assert same.json()["model"] == "claude-x"  # the session's own


def test_a_session_id_with_spaces_and_any_script_is_served(
    dev_server: ServerThread, http: httpx.Client
) -> None:
    session = "my session: café 日本"
    quoted = quote(session, safe="")
    answer = post_events(http, dev_server.url, quoted, user_events(2, prefix="sp"))
    assert answer.status_code == 200, answer.text
    listed = [info["session_id"] for info in http.get(f"{dev_server.url}/sessions").json()]
    assert session in listed
    read = http.get(f"{dev_server.url}/sessions/{quoted}/events", params={"follow": "0"})
    assert read.status_code == 200 and read.text.count("event: user/message") == 2
    assert http.get(f"{dev_server.url}/sessions/{quoted}/messages").status_code == 200
    assert http.get(f"{dev_server.url}/view/{quoted}").status_code == 200


# ---------------------------------------------------------------- bad input


_BIG = encode(UserMessageEvent(id="big", content=[TextPart(text="y" * 2000)]))
_BAD_INPUT = [
    # (path, body — GOOD is replaced by two valid events —, headers, status, code, named)
    (
        "/sessions/s1/events",
        b"{not json",
        {"content-type": "application/json"},
        400,
        "invalid_event",
        "event 0",
    ),
    ("/sessions/s1/events", b"[1, 2", {}, 400, "invalid_json", "not JSON"),
    ("/sessions/s1/events", b'GOOD\n{"type":"tool/result"}\n', {}, 400, "invalid_event", "event 2"),
    (
        "/sessions/s1/events",
        b'GOOD\n{"type":"usage","session_id":"s9","usage":{}}',
        {},
        400,
        "session_mismatch",
        "'s9'",
    ),
    ("/sessions/s1/events", b"  \n ", {}, 400, "empty_body", "no events"),
    ("/sessions/s1/events?from=fortran", b"GOOD", {}, 400, "unknown_runtime", "'fortran'"),
    ("/sessions/s1/events", b"GOOD\n" + b" " * 5000, {}, 413, "body_too_large", "limit"),
    ("/sessions/s1/events", b"GOOD\n" + _BIG, {}, 413, "event_too_large", "event 2"),
    ("/sessions/bad%09id/events", b"GOOD", {}, 400, "bad_session_id", "session id"),
    ("/sessions/s1/events", b"GOOD\n" * 3, {}, 413, "too_many_events", "limit is 5"),
]


@pytest.mark.parametrize(("path", "body", "headers", "status", "code", "named"), _BAD_INPUT)
def test_bad_input_is_a_4xx_json_error_naming_the_problem_and_appends_nothing(
    store: MemoryStore,
    http: httpx.Client,
    path: str,
    body: bytes,
    headers: dict[str, str],
    status: int,
    code: str,
    named: str,
) -> None:
    limits = Limits(max_body_bytes=4096, max_event_bytes=1024, max_events_per_request=5)
    good = encode_lines(user_events(2, prefix="ok")).rstrip()
    with ServerThread(create_app(store, tokens=None, limits=limits)) as server:
        response = http.post(
            server.url + path, content=body.replace(b"GOOD", good), headers=headers
        )
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["code"] == code
        assert named in error["message"]
        assert store.list_sessions() == []  # the valid events before the bad one neither
        # the same server accepts the valid events alone
        ok = http.post(f"{server.url}/sessions/s1/events", content=good)
        assert ok.json()["appended"] == 2


def test_bad_last_event_id_is_rejected(dev_server: ServerThread, http: httpx.Client) -> None:
    response = http.get(f"{dev_server.url}/sessions/s1/events", headers={"Last-Event-ID": "seven"})
    assert response.status_code == 400
    assert "Last-Event-ID" in response.json()["error"]["message"]


# ---------------------------------------------------------------- auth


@pytest.fixture
def auth_server(store: MemoryStore) -> Iterator[ServerThread]:
    with ServerThread(create_app(store, tokens=TOKENS, keepalive=0.5)) as server:
        yield server


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("headers", "path", "status"),
    [
        ({}, "/sessions/s1/events", 401),  # no token
        (_bearer("not-a-configured-token-000"), "/sessions/s1/events", 401),
        (_bearer(READER), "/sessions/s1/events", 403),  # read token used to write
        (_bearer(OTHER), "/sessions/s1/events", 403),  # token of another session
        (_bearer(ADMIN), "/sessions/s1/events", 403),  # read-only on every session
        ({}, f"/sessions/s1/events?token={WRITER}", 401),  # query tokens only for GET
    ],
)
def test_refused_writes_write_nothing(
    auth_server: ServerThread,
    http: httpx.Client,
    store: MemoryStore,
    headers: dict[str, str],
    path: str,
    status: int,
) -> None:
    response = http.post(
        auth_server.url + path, content=encode_lines(user_events(2, prefix="x")), headers=headers
    )
    assert response.status_code == status
    assert response.json()["error"]["code"] in ("unauthenticated", "forbidden")
    assert store.list_sessions() == []


def test_tokens_are_scoped_per_session_and_right(
    auth_server: ServerThread, http: httpx.Client
) -> None:
    url = auth_server.url
    events = encode_lines(user_events(2, prefix="w"))
    assert (
        http.post(f"{url}/sessions/s1/events", content=events, headers=_bearer(WRITER)).json()[
            "appended"
        ]
        == 2
    )
    assert (
        http.post(f"{url}/sessions/s2/events", content=events, headers=_bearer(OTHER)).json()[
            "appended"
        ]
        == 2
    )
    read = f"{url}/sessions/s1/events?follow=0"
    assert http.get(read).status_code == 401
    assert http.get(read, headers=_bearer(OTHER)).status_code == 403  # other session
    assert http.get(read, headers=_bearer(WRITER)).status_code == 403  # write-only token
    ok = http.get(read, headers=_bearer(READER))
    assert [m.id for m in SSEEventDecoder().feed(ok.content)] == ["0", "1"]
    by_query = http.get(f"{read}&token={READER}")  # what EventSource can do
    assert by_query.status_code == 200 and b"id: 1" in by_query.content
    assert http.get(f"{url}/sessions/s1/messages", headers=_bearer(OTHER)).status_code == 403
    assert http.get(f"{url}/view/s1?token={OTHER}").status_code == 403
    assert http.get(f"{url}/sessions").status_code == 401
    listed = http.get(f"{url}/sessions", headers=_bearer(READER)).json()
    assert [s["session_id"] for s in listed] == ["s1"]
    everything = http.get(f"{url}/sessions", headers=_bearer(ADMIN)).json()
    assert [s["session_id"] for s in everything] == ["s1", "s2"]


def test_token_file_format_errors_name_the_line() -> None:
    with pytest.raises(ValueError, match="line 2: unknown right 'admin'"):
        Tokens.parse(f"{WRITER} s1 write\n{READER} s1 admin")
    with pytest.raises(ValueError, match="shorter than 16"):
        Tokens.parse("short s1 read")
    tokens = Tokens.parse(f"{WRITER} s1 write; {WRITER} s3 read")
    assert tokens.allows(WRITER, "s1", "write") and tokens.allows(WRITER, "s3", "read")
    assert not tokens.allows(WRITER, "s3", "write")
    assert not tokens.allows(WRITER[:-1], "s1", "write")


def test_every_token_check_compares_every_grant_in_constant_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No early exit and no plain ``==``: each check runs ``hmac.compare_digest`` over
    fixed-size digests of every grant, whether the token matches first, last or never."""
    import hmac

    import universal_event.server._auth as auth

    compared: list[tuple[int, int]] = []
    real_compare = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return real_compare(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", recording)
    tokens = Tokens.parse(f"{WRITER} s1 write\n{READER} s1 read\n{ADMIN} * read,write")
    for presented in (WRITER, ADMIN, "x", "guess" * 40):
        compared.clear()
        tokens.allows(presented, "s1", "read")
        assert compared == [(32, 32)] * 3, presented


# ---------------------------------------------------------------- live fan-out and resume


def _produce(base: str, session: str, total: int, seed: int, pace: float) -> threading.Thread:
    """A producer posting ``total`` events in random batches, some of them twice."""

    def run() -> None:
        rng = random.Random(seed)
        events = user_events(total, prefix=f"p{seed}")
        with httpx.Client(timeout=10) as client:
            position = 0
            while position < total:
                batch = events[position : position + rng.randint(1, 25)]
                assert post_events(client, base, session, batch).status_code == 200
                if rng.random() < 0.2:  # a producer retry: must add nothing
                    assert post_events(client, base, session, batch).json()["appended"] == 0
                position += len(batch)
                time.sleep(rng.random() * pace)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_fifty_clients_with_random_disconnects_get_every_event_once_in_order(
    dev_server: ServerThread, store: MemoryStore
) -> None:
    total = 600
    rng = random.Random(1234)
    clients = [
        ResumingClient(
            dev_server.url, "live", rng=random.Random(rng.random()), disconnects=rng.randint(1, 4)
        )
        for _ in range(50)
    ]

    async def watch() -> None:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(timeout=20, limits=limits) as client:
            deadline = time.monotonic() + 40
            await asyncio.gather(*(c.run(client, total - 1, deadline) for c in clients))

    producer = _produce(dev_server.url, "live", total, seed=5, pace=0.01)
    asyncio.run(watch())
    producer.join(10)
    expected = [(event.seq, event.id) for event in store.read("live")]
    assert [seq for seq, _ in expected] == list(range(total))
    for client in clients:
        assert client.received == expected
    assert sum(c.connections for c in clients) >= 50 + sum(
        1 for c in clients
    )  # reconnects happened


def test_an_overflowing_slow_client_is_disconnected_resumes_and_the_producer_never_waits(
    store: MemoryStore,
) -> None:
    limits = Limits(client_buffer_events=8)
    app = create_app(store, tokens=None, limits=limits, keepalive=0.2)
    total = 300
    with ServerThread(app) as server:
        slow = ResumingClient(server.url, "slow", rng=random.Random(3), disconnects=0)
        fast = ResumingClient(server.url, "slow", rng=random.Random(4), disconnects=0)
        post_times: list[float] = []
        producing = threading.Event()

        def produce() -> None:
            producing.wait(10)
            with httpx.Client(timeout=10) as client:
                for index in range(0, total, 10):
                    started = time.monotonic()
                    batch = user_events(10, prefix=f"s{index}", size=20_000)
                    assert post_events(client, server.url, "slow", batch).status_code == 200
                    post_times.append(time.monotonic() - started)

        async def slow_reader(client: httpx.AsyncClient) -> None:
            # Never read until the producer is done: the server-side buffer overflows.
            url = f"{server.url}/sessions/slow/events"
            async with client.stream("GET", url) as response:
                producing.set()
                while producer.is_alive():
                    await asyncio.sleep(0.05)
                body = b"".join([chunk async for chunk in response.aiter_raw()])
            decoder = SSEEventDecoder()
            for event in decoder.feed_events(body):
                slow.received.append((event.seq, event.id))
            slow.last_event_id = decoder.last_event_id
            slow.server_closed += 1

        async def main() -> None:
            async with httpx.AsyncClient(timeout=20) as client:
                await slow_reader(client)
                deadline = time.monotonic() + 20
                await asyncio.gather(
                    slow.run(client, total - 1, deadline), fast.run(client, total - 1, deadline)
                )

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        asyncio.run(main())
        producer.join(10)
        health = httpx.get(f"{server.url}/healthz").json()
    expected = [(event.seq, event.id) for event in store.read("slow")]
    assert len(expected) == total
    assert slow.received == expected and fast.received == expected
    assert slow.server_closed >= 1 and health["overflow_disconnects"] >= 1
    assert max(post_times) < 2.0  # the producer was never held up by the stalled client


def test_a_surface_intent_that_does_not_apply_is_refused_and_nothing_is_stored(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    """A replace of seqs not on the surface would be stored and then make the session
    fail to load anywhere; it is refused (422), and a valid one goes through."""
    from universal_event.events import Surface
    from universal_event.log import SessionLog

    url = f"{dev_server.url}/sessions/s1/events"
    post_events(http, dev_server.url, "s1", user_events(3, prefix="sv"))
    bad = UserMessageEvent(
        id="bad", content=[TextPart(text="x")], surface=Surface(op="replace", start=40, end=41)
    )
    refused = http.post(url, content=encode(bad))
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "bad_surface_intent"
    assert store.latest_seq("s1") == 2
    summary = UserMessageEvent(
        id="sum", content=[TextPart(text="summary")], surface=Surface(op="replace", start=0, end=1)
    )
    assert http.post(url, content=encode(summary)).json()["appended"] == 1
    texts = [m.content[0].text for m in SessionLog.open(store, "s1").derive_messages()]
    assert texts[0] == "summary" and len(texts) == 2


def test_a_posted_replace_may_name_its_range_by_event_ids(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    """``start_id``/``end_id`` name stored events (or ones earlier in the same post):
    the server stores the range by seqs; an id it does not hold is refused (422)."""
    from universal_event.events import Surface
    from universal_event.log import SessionLog

    url = f"{dev_server.url}/sessions/s1/events"
    post_events(http, dev_server.url, "s1", user_events(3, prefix="sv"))
    ids = [event.id for event in store.read("s1")]
    unknown = UserMessageEvent(
        id="bad",
        content=[TextPart(text="x")],
        surface=Surface(op="replace", start_id="nope", end_id=ids[1]),
    )
    refused = http.post(url, content=encode(unknown))
    assert refused.status_code == 422 and "'nope' is not logged" in refused.text
    summary = UserMessageEvent(
        id="sum",
        content=[TextPart(text="summary")],
        surface=Surface(op="replace", start_id=ids[1], end_id=ids[2]),
    )
    assert http.post(url, content=encode(summary)).json()["appended"] == 1
    (stored,) = list(store.read("s1", 3))
    assert isinstance(stored, UserMessageEvent)
    assert stored.surface == Surface(op="replace", start=1, end=2)  # seqs only
    assert http.post(url, content=encode(summary)).json()["appended"] == 0  # a retry
    texts = [m.content[0].text for m in SessionLog.open(store, "s1").derive_messages()]
    assert texts[1:] == ["summary"] and len(texts) == 2


def test_a_newer_writers_surface_event_keeps_its_place_for_a_posted_replace(
    dev_server: ServerThread, http: httpx.Client, store: MemoryStore
) -> None:
    """A user/message holding a part type this version does not know reads back as
    native/unknown, yet it is on the surface (the log keeps its slot): a summary posted
    over it is accepted, as a SessionLog in this process would accept it."""
    from universal_event.events import NativeUnknownEvent, Surface
    from universal_event.log import SessionLog

    written = {
        "type": "user/message",
        "seq": 0,
        "id": "newer-0",
        "session_id": "s1",
        "ts": 1.0,
        "content": [{"type": "text", "text": "hi"}, {"type": "audio", "data": "AAAA"}],
    }
    recovered = NativeUnknownEvent(
        seq=0,
        id="newer-0",
        session_id="s1",
        ts=1.0,
        runtime="universal-event",
        native_type="user/message",
        payload=written,
        reason="$.content[1].type 'audio' unknown to this version",
    )
    store.append("s1", [recovered], expected_seq=0)
    post_events(http, dev_server.url, "s1", user_events(1, prefix="nw"))
    summary = UserMessageEvent(
        id="sum", content=[TextPart(text="summary")], surface=Surface(op="replace", start=0, end=1)
    )
    answer = http.post(f"{dev_server.url}/sessions/s1/events", content=encode(summary))
    assert answer.status_code == 200, answer.text
    texts = [m.content[0].text for m in SessionLog.open(store, "s1").derive_messages()]
    assert texts == ["summary"]
