"""Incremental Server-Sent Events framing (bytes in, frames out).

The one SSE parser of the project: the adapters read provider streams with it, and
:class:`universal_event.sse.SSEEventDecoder` (the control plane's clients) builds on it.

Input may be cut anywhere: inside a line, between ``\\r`` and ``\\n``, inside a UTF-8
sequence. ``feed`` buffers the incomplete tail; ``flush`` returns a final frame that
lacked its blank line (a cut stream).

Speed. This framer sits under every streamed API response, so it works frame by frame,
not line by line: the input is split on the blank line (``\\n\\n``) in one C-level
pass, and the shapes providers send — ``data: ...`` alone (Chat Completions) or
``event: ...`` then ``data: ...`` (Messages, Responses) — are sliced out without looking
at each line. Anything else (comments, ``id:``, several ``data:`` lines, other fields)
goes through the line parser, which follows the WHATWG rules. The APIs end lines with
``\\n``; a ``\\r`` (a proxy rewrote the stream) is normalised to ``\\n`` first, with a
``\\r`` at the very end of the input held back until the next chunk says whether a
``\\n`` follows it.
"""

from __future__ import annotations

import msgspec

__all__ = ["SSEDecoder", "SSEFrame"]


_EVENT_NAMES: dict[bytes, str] = {}
"""``event:`` line → its name, shared by every decoder (names are few: the APIs' types)."""


class SSEFrame(msgspec.Struct, frozen=True):
    """One SSE event: ``event`` name (None when absent), raw ``data`` bytes, ``id``."""

    event: str | None
    data: bytes
    id: str | None = None
    has_data: bool = True
    """False for a frame with an ``event:`` line but no ``data:`` line (not dispatched)."""


class SSEDecoder:
    """Splits a byte stream into :class:`SSEFrame` objects."""

    def __init__(self) -> None:
        self._pending: list[bytes] = []
        """Input not framed yet: the start of a frame, then chunks without a line end."""
        self._held_cr = False
        """The pending input ends with a ``\r``: the next chunk completes its line end."""
        self._id: str | None = None
        """The last event id: it carries over to the frames after it (WHATWG)."""
        self.unrecognised: list[bytes] = []
        """Lines that are no SSE field (an HTML error page, a proxy's plain-text
        message): the standard ignores them; an adapter keeps them as native/unknown."""

    @property
    def last_id(self) -> str | None:
        """The id in effect after the last complete frame, even one without data."""
        return self._id

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        """Frames completed by ``chunk``."""
        if type(chunk) is not bytes:
            chunk = bytes(chunk)
        pending = self._pending
        if b"\n" not in chunk and b"\r" not in chunk and not self._held_cr:
            if chunk:  # no line end: no frame can have completed
                pending.append(chunk)
            return []
        if pending:
            pending.append(chunk)
            data = b"".join(pending)
            pending.clear()
        else:
            data = chunk
        held = b""
        if b"\r" in data:
            if data[-1] == 0x0D:  # maybe the first half of "\r\n": wait for the next chunk
                data, held = data[:-1], b"\r"
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        frames = data.split(b"\n\n")
        tail = frames.pop() + held
        if tail:
            pending.append(tail)
        self._held_cr = bool(held)
        return self._frames(frames)

    def flush(self) -> list[SSEFrame]:
        """The pending frame of a stream that ended without its blank line."""
        if not self._pending:
            return []
        data = b"".join(self._pending).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        self._pending.clear()
        self._held_cr = False
        return self._frames([data])

    def _frames(self, raw_frames: list[bytes]) -> list[SSEFrame]:
        """Frames from blocks of ``\n``-separated lines (each ends at a blank line)."""
        frames: list[SSEFrame] = []
        for raw in raw_frames:
            head, _, rest = raw.partition(b"\n")
            if not rest:
                if head.startswith(b"data:"):  # Chat Completions: one data line
                    data = head[6:] if head.startswith(b"data: ") else head[5:]
                    frames.append(SSEFrame(None, data, self._id))
                    continue
            elif head.startswith(b"event:") and rest.startswith(b"data:") and b"\n" not in rest:
                # Messages, Responses: one event line, one data line.
                data = rest[6:] if rest.startswith(b"data: ") else rest[5:]
                frames.append(SSEFrame(self._event_name(head), data, self._id))
                continue
            frame = self._parse(raw)
            if frame is not None:
                frames.append(frame)
        return frames

    def _event_name(self, line: bytes) -> str:
        """The name on an ``event:`` line; a stream repeats a few names, decoded once."""
        name = _EVENT_NAMES.get(line)
        if name is None:
            value = line[7:] if line.startswith(b"event: ") else line[6:]
            name = value.decode("utf-8", "replace")
            if len(_EVENT_NAMES) < 512:  # a bound, whatever a stream sends
                _EVENT_NAMES[line] = name
        return name

    def _parse(self, raw: bytes) -> SSEFrame | None:
        """The line parser: any field order, comments, ``id``, several data lines."""
        event: str | None = None
        data: list[bytes] = []
        for line in raw.split(b"\n"):
            if not line:
                # A blank line at the start of the block (a run of blank lines in the
                # stream): it ends a frame that has nothing yet.
                continue
            if line[0] == 0x3A:  # ":" comment
                continue
            field, _, value = line.partition(b":")
            if value[:1] == b" ":
                value = value[1:]
            if field == b"data":
                data.append(value)
            elif field == b"event":
                event = value.decode("utf-8", "replace")
            elif field == b"id" and b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
            elif field != b"retry" and field != b"id":
                self.unrecognised.append(line)
        if not data and event is None:
            return None
        return SSEFrame(event, b"\n".join(data), self._id, bool(data))
