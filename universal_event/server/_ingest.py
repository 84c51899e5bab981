"""Turn a POSTed body into events: native (``?from=RUNTIME``) or universal.

Universal events come as a JSON array, one JSON object (``application/json``), or
JSON lines (any other content type). Native input is
the runtime's own wire format (SSE bytes for API streams, JSON lines for CLI
runtimes); each POST is one complete native stream, normalised by a fresh adapter
(``close()`` runs at the end, so a stream cut mid-way is marked as such).

Idempotency. Events are de-duplicated by ``id``. Native events get no stable id from
their adapter, and a universal event may come without one, so those ids are derived
from the request: with an ``Idempotency-Key`` header, ``<key>~<fingerprint>-<index>``
(the fingerprint is of the runtime and the body); without one, ``<hash>-<index>``, the
hash being of the runtime and the body. A retried POST (same body, or same key and
body) therefore yields the same ids and appends nothing; the same key with another
body is refused by the writer (422), not half applied.

An ``Idempotency-Key`` applies to the events sent without an id: an event that
carries its own id is de-duplicated by that id alone (and refused, 409, when the id is
stored with another body; see :mod:`universal_event.server._writer`). Ids of the shape
keys produce (``<key>~<12 hex digits>-<index>``) are reserved for them: an event sent
with such an id is refused (422), or it would block the key.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import NamedTuple

import msgspec

from universal_event.codec import decode, encode
from universal_event.derive import rename_surface_ids
from universal_event.errors import AdapterError, DecodeError
from universal_event.events import Event
from universal_event.server._hub import DEFAULT_BUFFER_BYTES, DEFAULT_SEND_TIMEOUT
from universal_event.server._writer import is_keyed_id, keyed_id

__all__ = ["BadInput", "Limits", "ParsedBody", "parse_body"]

_IDEMPOTENCY_KEY = re.compile(r"[!-~]{1,200}")
"""Printable ASCII without spaces, at most 200 characters."""


@dataclass(frozen=True)
class Limits:
    """Size limits of the write path (bytes and counts)."""

    max_body_bytes: int = 8 * 1024 * 1024
    max_event_bytes: int = 1024 * 1024
    max_events_per_request: int = 10_000
    client_buffer_events: int = 4096
    """SSE frames queued per client before it is disconnected (and resumes)."""
    client_buffer_bytes: int = DEFAULT_BUFFER_BYTES
    """Bytes of SSE frames queued per client before it is disconnected (and resumes)."""
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    """Seconds a write to an SSE client may wait for it to read before it is dropped."""


class BadInput(Exception):
    """Input the server refuses: becomes a 4xx JSON error; nothing is appended."""

    def __init__(self, status: int, code: str, message: str) -> None:
        self.status = status
        self.code = code
        self.message = message
        super().__init__(message)


class ParsedBody(NamedTuple):
    events: list[Event]
    idempotency_key: tuple[str, str] | None
    """The request's ``Idempotency-Key`` and its body's fingerprint, if it had one."""


def parse_body(
    body: bytes,
    *,
    session_id: str,
    runtime: str | None,
    content_type: str,
    idempotency_key: str | None,
    limits: Limits,
) -> ParsedBody:
    """The events a POST carries, checked against ``limits`` and the session."""
    if idempotency_key is not None and not _IDEMPOTENCY_KEY.fullmatch(idempotency_key):
        raise BadInput(
            400,
            "bad_idempotency_key",
            "the Idempotency-Key header must be 1 to 200 printable ASCII characters without spaces",
        )
    if not body.strip():
        raise BadInput(400, "empty_body", "the request body holds no events")
    events = (
        _native(body, runtime, session_id)
        if runtime is not None
        else _universal(body, content_type, limits)
    )
    if len(events) > limits.max_events_per_request:
        raise BadInput(
            413,
            "too_many_events",
            f"{len(events)} events in one request; the limit is {limits.max_events_per_request}",
        )
    digest = hashlib.sha256(f"{runtime}\0".encode() + body).hexdigest()
    fingerprint = digest[:12]
    checked: list[Event] = []
    renamed: dict[str, str] = {}  # an adapter's event ids → the ids stored
    for index, event in enumerate(events):
        if event.session_id and event.session_id != session_id:
            raise BadInput(
                400,
                "session_mismatch",
                f"event {index} belongs to session {event.session_id!r}, "
                f"not {session_id!r} (the URL's)",
            )
        if runtime is None and event.id and is_keyed_id(event.id):
            raise BadInput(
                422,
                "reserved_event_id",
                f"event {index} has id {event.id[:120]!r}, of the shape reserved for ids "
                "made from an Idempotency-Key (KEY~FINGERPRINT-INDEX); choose another id",
            )
        if runtime is not None or not event.id:
            derived = (
                keyed_id(idempotency_key, fingerprint, index)
                if idempotency_key is not None
                else f"{digest[:32]}-{index}"
            )
            if event.id:
                renamed[event.id] = derived
            event = msgspec.structs.replace(event, id=derived)
        event = rename_surface_ids(event, renamed)
        size = len(encode(event))
        if size > limits.max_event_bytes:
            raise BadInput(
                413,
                "event_too_large",
                f"event {index} ({event.__struct_config__.tag}) is {size} bytes; "
                f"the limit is {limits.max_event_bytes}",
            )
        checked.append(event)
    return ParsedBody(
        checked, (idempotency_key, fingerprint) if idempotency_key is not None else None
    )


def _native(body: bytes, runtime: str, session_id: str) -> list[Event]:
    from adapters import RUNTIMES, create_adapter

    if runtime not in RUNTIMES:
        raise BadInput(
            400,
            "unknown_runtime",
            f"unknown runtime {runtime!r} in ?from=; known: {', '.join(sorted(RUNTIMES))}",
        )
    try:
        adapter = create_adapter(runtime, session_id=session_id)
        return [*adapter.feed(body), *adapter.close()]
    except (AdapterError, DecodeError, ValueError) as exc:
        raise BadInput(422, "bad_native_input", f"[{runtime}] {exc}") from None
    except ImportError as exc:
        raise BadInput(501, "runtime_not_available", f"runtime {runtime!r}: {exc}") from None


def _universal(body: bytes, content_type: str, limits: Limits) -> list[Event]:
    stripped = body.lstrip()
    try:
        if stripped.startswith(b"["):
            raws = msgspec.json.decode(body, type=list[msgspec.Raw])
            return [_one(bytes(raw), index, limits) for index, raw in enumerate(raws)]
        if content_type.split(";")[0].strip() == "application/json":
            return [_one(body, 0, limits)]
        # JSON lines: application/x-ndjson, application/jsonl, text/plain, or unnamed.
        lines = [line for line in body.splitlines() if line.strip()]
        return [_one(line, index, limits) for index, line in enumerate(lines)]
    except msgspec.DecodeError as exc:
        raise BadInput(400, "invalid_json", f"the body is not JSON: {exc}") from None


def _one(raw: bytes, index: int, limits: Limits) -> Event:
    if len(raw) > limits.max_event_bytes:
        raise BadInput(
            413,
            "event_too_large",
            f"event {index} is {len(raw)} bytes; the limit is {limits.max_event_bytes}",
        )
    try:
        return decode(raw)
    except DecodeError as exc:
        if _truncated(raw):  # a body cut short is not JSON, whatever it was meant to be
            raise BadInput(
                400, "invalid_json", f"event {index} is not JSON: {exc.problem}"
            ) from None
        raise BadInput(400, "invalid_event", f"event {index}: {exc}") from None


def _truncated(raw: bytes) -> bool:
    """Whether ``raw`` is JSON cut short (other malformed JSON stays ``invalid_event``,
    as the tests of the API pin it)."""
    try:
        msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        return str(exc).startswith("Input data was truncated")
    except RecursionError:
        return False
    return False
