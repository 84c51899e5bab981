"""Feed whole native inputs through an adapter (what ``normalize``/``import`` do)."""

from __future__ import annotations

from universal_event.events import Event

__all__ = [
    "REQUEST_RUNTIMES",
    "import_events",
    "normalize_bytes",
    "parse_request_body",
    "with_stable_ids",
    "without_bom",
]

REQUEST_RUNTIMES: dict[str, str] = {
    "anthropic-request": "adapters.anthropic",
    "openai-chat-request": "adapters.openai_chat",
    "openai-responses-request": "adapters.openai_responses",
}
"""``<target>-request`` runtime → the request-format package whose ``parse_request``
reads a provider request body (a history held in that provider's format)."""

_CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"


def without_bom(data: bytes) -> bytes:
    """A file's bytes without the UTF-8 byte-order mark some editors put first (JSON
    has none: the first line would not decode, and a stream's first event, say the
    session start, would be kept as native/unknown)."""
    return data[len(_BOM) :] if data.startswith(_BOM) else data


def normalize_bytes(runtime: str, data: bytes) -> list[Event]:
    """Normalise a whole native input (raw bytes in the runtime's wire format).

    Every adapter's ``feed`` accepts raw bytes of its wire format (SSE for the API
    streams, JSON lines for the CLI runtimes), buffered across chunk boundaries. A
    request body's events get what an adapter's have: an id (from the body's bytes,
    as an import numbers them) and the time it was read (a request has no times of its
    own).
    """
    data = without_bom(data)
    if runtime in REQUEST_RUNTIMES:
        import time

        import msgspec

        now = time.time()
        return [
            msgspec.structs.replace(event, ts=event.ts or now)
            for event in with_stable_ids(runtime, data, parse_request_body(runtime, data))
        ]
    from adapters import create_adapter

    adapter = create_adapter(runtime)
    events: list[Event] = []
    view = memoryview(data)
    for offset in range(0, len(view), _CHUNK):
        events.extend(adapter.feed(bytes(view[offset : offset + _CHUNK])))
    events.extend(adapter.close())
    return events


def parse_request_body(runtime: str, data: bytes) -> list[Event]:
    """A provider request body (one JSON object: the ``create()`` kwargs) as events."""
    import importlib

    import msgspec

    from universal_event.errors import DecodeError

    try:
        body = msgspec.json.decode(without_bom(data))
    except msgspec.DecodeError as exc:
        raise DecodeError(f"not a JSON request body: {exc}") from exc
    if not isinstance(body, dict):
        raise DecodeError("a request body must be a JSON object")
    events: list[Event] = importlib.import_module(REQUEST_RUNTIMES[runtime]).parse_request(body)
    return events


def import_events(runtime: str, data: bytes) -> list[Event]:
    """The events of a native input, each with an id that depends only on the input up
    to the line that completed it (and its place among that line's events).

    The log is idempotent by event id, so importing the same input again adds nothing,
    and importing it again once it has grown (a capture still being written, a
    transcript with new turns) adds only what the new lines complete. What the shorter
    input's end closed (a turn cut there ends ``interrupted``) stays logged. A request
    body, or any input that is one JSON document, is numbered from its bytes as a whole
    (:func:`with_stable_ids`).
    """
    data = without_bom(data)
    if runtime in REQUEST_RUNTIMES:
        return with_stable_ids(runtime, data, parse_request_body(runtime, data))
    import hashlib

    import msgspec

    from adapters import create_adapter

    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        pass  # lines (JSON lines, SSE): numbered line by line below
    else:  # one JSON document (a non-streamed response): whole, as a request body is
        return with_stable_ids(runtime, data, normalize_bytes(runtime, data))

    adapter = create_adapter(runtime)
    read_so_far = hashlib.sha256(runtime.encode() + b"\0")
    events: list[Event] = []

    def numbered(completed: list[Event], digest: str) -> None:
        events.extend(
            msgspec.structs.replace(event, id=f"import-{digest}-{index}")
            for index, event in enumerate(completed)
        )

    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        line = data[start:end]
        start = end
        read_so_far.update(line)
        completed = adapter.feed(line)
        if completed:
            numbered(completed, read_so_far.copy().hexdigest()[:24])
    read_so_far.update(b"\0end of input")
    numbered(adapter.close(), read_so_far.hexdigest()[:24])
    return events


def with_stable_ids(runtime: str, data: bytes, events: list[Event]) -> list[Event]:
    """The same events with ids derived from the input's bytes and their position.

    Importing the same input twice then adds nothing: the log is idempotent by event id,
    so the second import finds every id already logged. A different input (or the same
    bytes read as another runtime) gets different ids and appends.
    """
    import hashlib

    import msgspec

    digest = hashlib.sha256(runtime.encode() + b"\0" + data).hexdigest()[:24]
    return [
        msgspec.structs.replace(event, id=f"import-{digest}-{index}")
        for index, event in enumerate(events)
    ]
