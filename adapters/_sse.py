"""Incremental Server-Sent Events framing for provider streams (bytes in, frames out).

Input may be cut anywhere: inside a line, between ``\\r`` and ``\\n``, inside a UTF-8
sequence. ``feed`` buffers the incomplete tail; ``flush`` returns a final frame that
lacked its blank line (a cut stream).
"""

from __future__ import annotations

import msgspec

__all__ = ["SSEDecoder", "SSEFrame"]


class SSEFrame(msgspec.Struct, frozen=True):
    """One SSE event: ``event`` name (None when absent), raw ``data`` bytes, ``id``."""

    event: str | None
    data: bytes
    id: str | None = None


class SSEDecoder:
    """Splits a byte stream into :class:`SSEFrame` objects."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._event: str | None = None
        self._data: list[bytes] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEFrame]:
        """Frames completed by ``chunk``."""
        self._buffer += chunk
        frames: list[SSEFrame] = []
        buffer = self._buffer
        start = 0
        length = len(buffer)
        while start < length:
            newline = buffer.find(b"\n", start)
            carriage = buffer.find(b"\r", start, newline if newline != -1 else length)
            if carriage != -1:
                if carriage + 1 == length:
                    break  # a "\r" at the end may be the first half of "\r\n"
                end = carriage
                next_start = carriage + 2 if buffer[carriage + 1] == 0x0A else carriage + 1
            elif newline != -1:
                end = newline
                next_start = newline + 1
            else:
                break
            frame = self._line(bytes(buffer[start:end]))
            if frame is not None:
                frames.append(frame)
            start = next_start
        del buffer[:start]
        return frames

    def flush(self) -> list[SSEFrame]:
        """The pending frame of a stream that ended without its blank line."""
        frames: list[SSEFrame] = []
        if self._buffer:
            frame = self._line(bytes(self._buffer))
            self._buffer.clear()
            if frame is not None:
                frames.append(frame)
        frame = self._line(b"")
        if frame is not None:
            frames.append(frame)
        return frames

    def _line(self, line: bytes) -> SSEFrame | None:
        if not line:
            if not self._data and self._event is None:
                return None
            frame = SSEFrame(self._event, b"\n".join(self._data), self._id)
            self._event = None
            self._data = []
            return frame
        if line[0] == 0x3A:  # ":" comment
            return None
        field, _, value = line.partition(b":")
        if value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._data.append(value)
        elif field == b"event":
            self._event = value.decode("utf-8", "replace")
        elif field == b"id":
            self._id = value.decode("utf-8", "replace")
        return None
