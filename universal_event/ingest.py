"""Feed whole native inputs through an adapter (what ``normalize``/``import`` do)."""

from __future__ import annotations

from universal_event.events import Event

__all__ = ["normalize_bytes"]

_CHUNK = 1 << 16


def normalize_bytes(runtime: str, data: bytes) -> list[Event]:
    """Normalise a whole native input (raw bytes in the runtime's wire format).

    Every adapter's ``feed`` accepts raw bytes of its wire format (SSE for the API
    streams, JSON lines for the CLI runtimes), buffered across chunk boundaries.
    """
    from adapters import create_adapter

    adapter = create_adapter(runtime)
    events: list[Event] = []
    view = memoryview(data)
    for offset in range(0, len(view), _CHUNK):
        events.extend(adapter.feed(bytes(view[offset : offset + _CHUNK])))
    events.extend(adapter.close())
    return events
