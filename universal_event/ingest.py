"""Feed whole native inputs through an adapter (what ``normalize``/``import`` do)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from universal_event.derive import rename_surface_ids
from universal_event.events import Event

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

    from universal_event.log import SessionLog
    from universal_event.parts import AssistantPart

__all__ = [
    "REQUEST_RUNTIMES",
    "append_imported",
    "append_request",
    "import_events",
    "normalize_bytes",
    "normalize_stream",
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

_DOCUMENT_RUNTIMES = frozenset({"anthropic", "openai-chat", "openai-responses"})
"""Runtimes whose input may be one JSON document (a non-streamed response). The others
read JSON lines, and a capture of one line is a line: its events get the ids they keep
once the capture has grown (numbered as a document, they were logged again)."""

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
    view = memoryview(data)
    chunks = (bytes(view[offset : offset + _CHUNK]) for offset in range(0, len(view), _CHUNK))
    return [event for events in normalize_stream(runtime, chunks) for event in events]


def _request_events(runtime: str, data: bytes) -> list[Event]:
    import time

    import msgspec

    now = time.time()
    return [
        msgspec.structs.replace(event, ts=event.ts or now)
        for event in with_stable_ids(runtime, data, parse_request_body(runtime, data))
    ]


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


def normalize_stream(runtime: str, chunks: Iterable[bytes]) -> Iterator[list[Event]]:
    """Normalise a native input as it arrives: the events each chunk completes, when it
    comes (a live stream piped in shows its events at once, each stamped on arrival),
    then the input end's (:func:`normalize_bytes` is this over a whole input). A
    request body, one JSON document, is read whole first."""
    if runtime in REQUEST_RUNTIMES:
        yield _request_events(runtime, without_bom(b"".join(chunks)))
        return
    from adapters import create_adapter

    adapter = create_adapter(runtime)
    start: bytes | None = b""  # the input's first bytes, until they tell a byte-order mark
    for chunk in chunks:
        if start is not None:
            start += chunk
            if len(start) < len(_BOM) and _BOM.startswith(start):
                continue
            chunk, start = without_bom(start), None
        completed = adapter.feed(chunk)
        if completed:
            yield completed
    if start:
        yield adapter.feed(without_bom(start))
    yield adapter.close()


def import_events(runtime: str, data: bytes) -> list[Event]:
    """The events of a native input, each with an id that depends only on the input up
    to the line that completed it (and its place among that line's events).

    The log is idempotent by event id, so importing the same input again adds nothing,
    and importing it again once it has grown (a capture still being written, a
    transcript with new turns) adds only what the new lines complete — a last line
    without its newline yet (a capture read just before the newline was written) is
    read as if it had it, so its events keep their ids once it comes. Turn ids the
    adapter makes up (the input has none) are made stable the same way, so the events
    a grown input adds belong to the turn its first import started. What the shorter
    input's end closed (a turn cut there ends ``interrupted``) stays logged. A request
    body, or an API runtime's input that is one JSON document (a non-streamed response),
    is numbered from its bytes as a whole (:func:`with_stable_ids`); a JSON-lines
    runtime's input of one line is numbered as its line.
    """
    data = without_bom(data)
    if runtime in REQUEST_RUNTIMES:
        return with_stable_ids(runtime, data, parse_request_body(runtime, data))
    import hashlib

    import msgspec

    from adapters import create_adapter

    if runtime in _DOCUMENT_RUNTIMES:
        try:
            msgspec.json.decode(data)
        except msgspec.DecodeError:
            pass  # lines (SSE): numbered line by line below
        else:  # one JSON document (a non-streamed response): whole, as a request body is
            return with_stable_ids(runtime, data, normalize_bytes(runtime, data))

    adapter = create_adapter(runtime)
    read_so_far = hashlib.sha256(runtime.encode() + b"\0")
    events: list[Event] = []
    turn_ids: dict[str, str] = {}

    def stable_turn(turn_id: str | None, event_id: str, read_to: int) -> str | None:
        # A turn id the input does not hold was made up by the adapter (at random):
        # it becomes one made from the turn's first event, the same on every import.
        # One the input holds is in the lines just read (the line that started the
        # turn): looked for there, not in the whole input (once per turn, that made
        # an import quadratic: 52 s for 20 MB of codex exec lines).
        if turn_id is None:
            return None
        if turn_id not in turn_ids:
            native = data.find(turn_id.encode(), max(0, read_to - _TURN_ID_WINDOW), read_to) >= 0
            turn_ids[turn_id] = turn_id if native else f"turn_{event_id}"
        return turn_ids[turn_id]

    renamed: dict[str, str] = {}

    def numbered(completed: list[Event], digest: str, read_to: int) -> None:
        for index, event in enumerate(completed):
            event_id = renamed[event.id] = f"import-{digest}-{index}"
            events.append(
                msgspec.structs.replace(
                    rename_surface_ids(event, renamed),
                    id=event_id,
                    turn_id=stable_turn(event.turn_id, event_id, read_to),
                )
            )

    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            # The last line without its newline (yet): fed and numbered as if it had it,
            # so its events get the ids they get once the capture has grown and the line
            # ends, and a re-import finds them logged. (Left to ``close()``, they were
            # numbered as the end of input, and logged again by the grown import.)
            line = data[start:]
            start = len(data)
            read_so_far.update(line.removesuffix(b"\r"))
            with_newline = read_so_far.copy()
            with_newline.update(b"\n")
            completed = adapter.feed(line + b"\n")
            if completed:
                numbered(completed, with_newline.hexdigest()[:24], start)
            break
        line = data[start : end + 1]
        start = end + 1
        # Ids as if the line ended "\n": a copy of the input with CRLF line ends (an
        # editor's, a Windows tool's) is the same input, found logged on import.
        read_so_far.update(line[:-2] + b"\n" if line.endswith(b"\r\n") else line)
        completed = adapter.feed(line)
        if completed:
            numbered(completed, read_so_far.copy().hexdigest()[:24], start)
    read_so_far.update(b"\0end of input")
    numbered(adapter.close(), read_so_far.hexdigest()[:24], len(data))
    return events


_TURN_ID_WINDOW = 1 << 16
"""Bytes before the end of the lines read in which a turn id counts as the input's own
(see ``stable_turn`` in :func:`import_events`)."""


def with_stable_ids(runtime: str, data: bytes, events: list[Event]) -> list[Event]:
    """The same events with ids derived from the input's bytes and their position.

    Importing the same input twice then adds nothing: the log is idempotent by event id,
    so the second import finds every id already logged. A different input (or the same
    bytes read as another runtime) gets different ids and appends.
    """
    import hashlib

    import msgspec

    digest = hashlib.sha256(runtime.encode() + b"\0" + data).hexdigest()[:24]
    ids = [f"import-{digest}-{index}" for index in range(len(events))]
    renamed = {event.id: new_id for event, new_id in zip(events, ids, strict=True) if event.id}
    return [
        msgspec.structs.replace(rename_surface_ids(event, renamed), id=new_id)
        for event, new_id in zip(events, ids, strict=True)
    ]


def _continues(whole: Sequence[AssistantPart], cut: Sequence[AssistantPart]) -> bool:
    """Whether ``whole`` continues ``cut``: the parts the cut message completed, then one
    of the same kind as the part it was cut inside (that part held what had arrived)."""
    if not cut or len(cut) > len(whole) or list(whole[: len(cut) - 1]) != list(cut[:-1]):
        return False
    last, grown = cut[-1], whole[len(cut) - 1]
    return type(last) is type(grown)


def append_imported(log: SessionLog, events: list[Event]) -> list[Event]:
    """Append an import's events (:func:`import_events`) to the session's log.

    An input imported while it was still being written can end inside a message (a
    Claude Code message comes as a line per block, and its last blocks were not there
    yet; a Codex response as an item per line); imported again once grown, it holds
    that message whole. The fuller message then *replaces* the earlier one on the
    surface (both stay in the log), so the model is not shown the response twice. It
    is recognised by its ``message_id`` (the provider's: one per response), or, where
    the input names none (``codex exec --json``, a rollout), as the message that the
    earlier import's end left ``partial`` in the same turn and whose parts it continues.

    The results an input's end logged are replaced the same way (:func:`_stale_results`).
    A Codex app-server stream with raw events holds a command's result until its raw
    ``function_call_output`` (the text Codex sends the model) comes; the adapter's
    ``close()`` logs the results it still holds, with the plain output, numbered as the
    end of that input. The grown input logs them again by the lines that complete them
    (the formatted output), under other ids. The grown import's results win: its first
    new result of the turn replaces the earlier end's results on the surface (all of
    them, so the grown results follow the message in the grown import's order), the
    next ones append. They are replaced, not left unlogged at the end: an input may
    never grow (a runtime killed after its command ran), and then the result its end
    logged is the only record of the command's output; replaced, it stays in the log
    (only the surface forgets it), so nothing logged is lost, and the model is shown
    each call's result once.
    """
    import msgspec

    from universal_event.events import AssistantMessageEvent, Surface, ToolResultEvent

    on_surface = set(log.surface_seqs())
    by_message_id: dict[str, int] = {}
    partial_in_turn: dict[str, AssistantMessageEvent] = {}
    stale = _stale_results(log, events, on_surface)

    def remember(message: AssistantMessageEvent) -> None:
        if message.message_id:
            by_message_id[message.message_id] = message.seq
        if message.turn_id is not None:
            if message.status == "partial" and not message.message_id:
                partial_in_turn[message.turn_id] = message
            else:
                partial_in_turn.pop(message.turn_id, None)

    def replaced_seq(message: AssistantMessageEvent) -> int | None:
        if message.message_id in by_message_id:
            return by_message_id[message.message_id]
        # A message cut before its text (reasoning only) had no id of its own yet.
        cut = partial_in_turn.get(message.turn_id or "")
        if cut is None or not _continues(message.content, cut.content):
            return None
        return cut.seq

    def replaced_results(result: ToolResultEvent) -> tuple[int, int] | None:
        seqs = stale.get(result.turn_id or "")
        if not seqs:
            return None
        surface = log.surface_seqs()
        first = next((i for i, seq in enumerate(surface) if seq in seqs), None)
        if first is None:
            seqs.clear()
            return None
        last = first
        while last + 1 < len(surface) and surface[last + 1] in seqs:
            last += 1
        seqs.difference_update(surface[first : last + 1])
        return surface[first], surface[last]

    for earlier in log.events():
        if isinstance(earlier, AssistantMessageEvent) and earlier.seq in on_surface:
            remember(earlier)
    logged: list[Event] = []
    for event in events:
        if log.event_by_id(event.id):
            logged.append(log.append(event))  # an event logged before is as it was
            continue
        if isinstance(event, ToolResultEvent):
            replaced = replaced_results(event) if event.surface is None else None
            if replaced is not None:
                event = msgspec.structs.replace(
                    event, surface=Surface(op="replace", start=replaced[0], end=replaced[1])
                )
            logged.append(log.append(event))
            continue
        if not isinstance(event, AssistantMessageEvent):
            logged.append(log.append(event))
            continue
        seq = replaced_seq(event) if event.surface is None else None
        if seq is not None:
            event = msgspec.structs.replace(
                event, surface=Surface(op="replace", start=seq, end=seq)
            )
        appended = log.append(event)
        remember(appended)
        logged.append(appended)
    return logged


def append_request(log: SessionLog, events: list[Event]) -> list[Event]:
    """Append a request body's events (:func:`import_events` of a ``<target>-request``)
    so that the session's surface becomes the history the request holds.

    A request body is a snapshot: it holds the whole conversation so far, and a client
    (a proxy logging each body) sends the next one with everything again. So the
    surface's beginning that the request repeats is kept, compared by what the events
    say (not their ids, times or sources: :func:`_said`), and the rest of the request
    goes in place of the rest of the surface: what the client sent next (the reply it
    got, the tool results, the new prompt) follows; where its copy of a reply differs
    from the one logged (a streamed response imported between), the client's, which is
    what the model was sent, takes the logged one's place (which stays in the log). A
    request that holds nothing past the surface's beginning (an older body imported
    after a newer) adds nothing; the same body again adds nothing (its ids are logged).
    The request's settings start a new epoch when they differ from those in force.
    """
    import msgspec

    from universal_event.derive import is_surface_event
    from universal_event.events import RequestHeaderEvent, Surface

    if all(log.event_by_id(event.id) is not None for event in events):
        return [log.append(event) for event in events]  # as logged before
    logged: list[Event] = []
    for event in events:
        if isinstance(event, RequestHeaderEvent):
            header = log.update_header(event)
            if header is not None:
                logged.append(header)
        elif not is_surface_event(event):
            logged.append(log.append(event))
    sent = [event for event in events if is_surface_event(event)]
    history = log.events()
    shown = log.surface_seqs()
    kept = 0
    while kept < min(len(shown), len(sent)) and _said(history[shown[kept]]) == _said(sent[kept]):
        kept += 1
    rest = sent[kept:]
    if rest and kept < len(shown):
        replace = Surface(op="replace", start=shown[kept], end=shown[-1])
        rest[0] = msgspec.structs.replace(rest[0], surface=replace)
    logged.extend(log.append(event) for event in rest)
    return logged


def _said(event: Event) -> Event:
    """What an event puts in the history: the event without its envelope (id, seq,
    session, time, turn, step, source, surface intent)."""
    import msgspec

    envelope = {"id": "", "seq": -1, "session_id": "", "ts": 0.0, "turn_id": None}
    cleared = msgspec.structs.replace(event, **envelope, step=None, source=None)
    if hasattr(cleared, "surface"):
        cleared = msgspec.structs.replace(cleared, surface=None)
    return cleared


def _stale_results(
    log: SessionLog, events: list[Event], on_surface: set[int]
) -> dict[str, set[int]]:
    """Turn id → seqs of the results on the surface that this import logs again.

    Such a result is one an earlier import's end logged: a ``tool/result`` of a turn
    this import has a new result in, for the same call, whose id this import does not
    hold. (A line's events keep their ids as the input grows, so a result some line
    logged is held again by id; what an input's end logged is numbered by that end,
    and the grown input logs the call's result under another id.) Only calls this
    import has a result for are counted: the surface loses no call's result. Turns
    without an id are left alone: their results could be another input's (``codex
    exec`` numbers its calls from ``item_0`` in every run).
    """
    from universal_event.events import ToolResultEvent

    held_ids = {event.id for event in events}
    calls: dict[str, set[str]] = {}
    for event in events:
        if isinstance(event, ToolResultEvent) and event.turn_id is not None:
            if not log.event_by_id(event.id):
                calls.setdefault(event.turn_id, set()).add(event.call_id)
    stale: dict[str, set[int]] = {}
    if not calls:
        return stale
    for earlier in log.events():
        if (
            isinstance(earlier, ToolResultEvent)
            and earlier.turn_id in calls
            and earlier.call_id in calls[earlier.turn_id]
            and earlier.id not in held_ids
            and earlier.seq in on_surface
        ):
            stale.setdefault(earlier.turn_id, set()).add(earlier.seq)
    return stale
