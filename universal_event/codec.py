"""Encode and decode Universal Events: single events, JSON lines, msgpack.

Decoders are built once (msgspec's advice) and decode straight into the typed structs.
Every failure raises :class:`~universal_event.errors.DecodeError` naming the JSON path.

Unknown event types. A log written by a newer producer may hold event types this
version does not know. ``decode``/``decode_lines`` take ``unknown``:

* ``"preserve"`` (the default for logs): the event is kept as ``native/unknown`` with
  ``runtime="universal-event"``, ``native_type`` = the unknown tag, ``payload`` = the
  whole raw object, and its envelope (``seq``, ``id``, ``session_id``, ``ts``) intact,
  so seq stays contiguous and nothing is lost;
* ``"raise"``: a :class:`DecodeError` at ``$.type``.

Unknown *fields* of known types are ignored (msgspec schema evolution).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import msgspec

from universal_event.errors import DecodeError
from universal_event.events import EVENT_TYPES, Event, EventBase, NativeUnknownEvent

__all__ = [
    "decode",
    "decode_lines",
    "decode_msgpack",
    "encode",
    "encode_lines",
    "encode_msgpack",
    "iter_lines",
    "to_builtins",
]

UnknownPolicy = Literal["preserve", "raise"]

_json_encoder = msgspec.json.Encoder()
_json_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event)
_raw_json_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_lax_json_decoder: msgspec.json.Decoder[Event] = msgspec.json.Decoder(Event, strict=False)
"""For an integer written as a float (``1.0``, ``1e2``): JSON Schema's ``integer`` (the
exported schema) takes it, and a producer in another language may write one."""
_INTEGRAL_FLOAT = "Expected `int`, got `float`"
_msgpack_encoder = msgspec.msgpack.Encoder()
_msgpack_decoder: msgspec.msgpack.Decoder[Event] = msgspec.msgpack.Decoder(Event)
_raw_msgpack_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder()

_PATH_RE = re.compile(r"^(?P<problem>.*?)(?: - at `(?P<path>[^`]*)`)?$", re.DOTALL)


def encode(event: EventBase) -> bytes:
    """One event as compact JSON bytes."""
    return _json_encoder.encode(event)


def encode_lines(events: Iterable[EventBase]) -> bytes:
    """Events as JSON lines (each line ends with ``\\n``)."""
    return _json_encoder.encode_lines(events)


def encode_msgpack(event: EventBase) -> bytes:
    """One event as msgpack bytes."""
    return _msgpack_encoder.encode(event)


def to_builtins(event: EventBase) -> dict[str, Any]:
    """One event as plain dicts/lists (what ``json.loads(encode(event))`` would give)."""
    result: dict[str, Any] = msgspec.to_builtins(event)
    return result


def decode(
    data: bytes | bytearray | memoryview | str, *, unknown: UnknownPolicy = "preserve"
) -> Event:
    """Decode one JSON event."""
    return _decode(_json_decoder, _raw_json_decoder, data, unknown, line=None)


def decode_msgpack(
    data: bytes | bytearray | memoryview, *, unknown: UnknownPolicy = "preserve"
) -> Event:
    """Decode one msgpack event."""
    return _decode(_msgpack_decoder, _raw_msgpack_decoder, data, unknown, line=None)


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError as exc:
        raise _not_utf8(exc, line=None) from None


def _not_utf8(exc: UnicodeEncodeError, *, line: int | None) -> DecodeError:
    """A ``str`` holding what UTF-8 cannot encode (a lone surrogate)."""
    return DecodeError(f"not encodable as UTF-8 at character {exc.start}: {exc.reason}", line=line)


def iter_lines(
    data: bytes | bytearray | memoryview | str, *, unknown: UnknownPolicy = "preserve"
) -> Iterator[Event]:
    """Decode JSON lines lazily; blank lines are skipped. Errors name the line."""
    if isinstance(data, str):
        data = _utf8(data)
    view = memoryview(data)
    start = 0
    line_number = 0
    length = len(view)
    raw = data if isinstance(data, bytes) else bytes(view)
    while start < length:
        end = raw.find(b"\n", start)
        if end == -1:
            end = length
        line_number += 1
        line = view[start:end]
        start = end + 1
        if _blank(line):
            continue
        yield _decode_line(line, line_number, unknown)


_WHITESPACE = frozenset(b" \t\n\r\x0b\x0c")
"""What ``bytes.strip`` strips."""


def _blank(line: memoryview) -> bool:
    """Whether a line is empty or whitespace only, of any length. Copied to be stripped
    only when it starts with whitespace: an event line starts with ``{`` and is not
    copied at all."""
    return not line or (line[0] in _WHITESPACE and not bytes(line).strip())


def decode_lines(
    data: bytes | bytearray | memoryview | str, *, unknown: UnknownPolicy = "preserve"
) -> list[Event]:
    """Decode JSON lines into a list of events."""
    return list(iter_lines(data, unknown=unknown))


def _decode_line(line: memoryview, line_number: int, unknown: UnknownPolicy) -> Event:
    return _decode(_json_decoder, _raw_json_decoder, line, unknown, line=line_number)


def _decode(
    decoder: msgspec.json.Decoder[Event] | msgspec.msgpack.Decoder[Event],
    raw_decoder: msgspec.json.Decoder[Any] | msgspec.msgpack.Decoder[Any],
    data: Any,
    unknown: UnknownPolicy,
    *,
    line: int | None,
) -> Event:
    """Decode into the typed union; every failure becomes a located DecodeError."""
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        return _recover(data, exc, unknown, raw_decoder, line=line)
    except msgspec.DecodeError as exc:
        raise _as_decode_error(exc, line=line) from None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 at byte {exc.start}: {exc.reason}", line=line) from None
    except UnicodeEncodeError as exc:
        raise _not_utf8(exc, line=line) from None
    except RecursionError:
        raise DecodeError("nesting too deep (recursion limit)", line=line) from None


def _recover(
    data: Any,
    exc: msgspec.ValidationError,
    unknown: UnknownPolicy,
    raw_decoder: msgspec.json.Decoder[Any] | msgspec.msgpack.Decoder[Any],
    *,
    line: int | None,
) -> Event:
    """Turn an event of an unknown type, or a known one holding a part (or another tagged
    value) of a type unknown to this version, into ``native/unknown``; re-raise anything
    else."""
    error = _as_decode_error(exc, line=line)
    if error.problem == _INTEGRAL_FLOAT and raw_decoder is _raw_json_decoder:
        try:
            return _lax_json_decoder.decode(data)
        except msgspec.MsgspecError:
            raise error from None  # 1.5 where an int belongs: the first error says so
    if unknown == "raise" or not error.path.endswith(".type"):
        raise error from None
    try:
        raw = raw_decoder.decode(data)
    except msgspec.DecodeError:
        raise error from None
    if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
        raise error from None
    if error.path == "$.type":
        if raw["type"] in EVENT_TYPES:
            raise error from None
        reason = "event type unknown to this version"
    else:  # a newer producer's part type inside a known event: keep the event whole
        tag = _value_at(raw, error.path)
        if (
            not isinstance(tag, str)
            or tag in _known_tags()
            or not error.problem.startswith("Invalid value")
        ):
            raise error from None  # no tag, or a known one in the wrong place: damage
        reason = f"{error.path} {tag!r} unknown to this version"
    envelope = {key: raw[key] for key in ("seq", "id", "session_id", "ts") if key in raw}
    try:
        return msgspec.convert(
            {
                **envelope,
                "type": "native/unknown",
                "runtime": "universal-event",
                "native_type": raw["type"],
                "payload": raw,
                "reason": reason,
            },
            NativeUnknownEvent,
        )
    except msgspec.ValidationError as envelope_error:
        raise _as_decode_error(envelope_error, line=line) from None


@functools.cache
def _known_tags() -> frozenset[str]:
    """Every tag of this version's tagged structs (parts, events)."""
    from universal_event import events, parts

    return frozenset(
        str(kind.__struct_config__.tag)
        for module in (events, parts)
        for kind in vars(module).values()
        if isinstance(kind, type)
        and issubclass(kind, msgspec.Struct)
        and kind.__struct_config__.tag is not None
    )


def _value_at(document: Any, path: str) -> Any:
    """The value a msgspec error path (``$.content[1].type``) names; None if none."""
    value = document
    for key, index in _PATH_STEP_RE.findall(path[1:]):
        try:
            value = value[int(index)] if index else value[key]
        except (KeyError, IndexError, TypeError):
            return None
    return value


_PATH_STEP_RE = re.compile(r"\.(\w+)|\[(\d+)\]")


def _as_decode_error(exc: msgspec.MsgspecError, *, line: int | None) -> DecodeError:
    match = _PATH_RE.match(str(exc))
    assert match is not None
    return DecodeError(match.group("problem"), path=match.group("path") or "$", line=line)
