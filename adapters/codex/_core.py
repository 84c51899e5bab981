"""What the live Codex dialects share: JSON-lines input, the message being built, tools, turns.

Both live dialects (``codex exec --json`` and the app-server v2 notifications) report a
model response as separate *items* (reasoning, agent message, command, ...), never as
one message. :class:`CodexCore` gathers the parts of one model response and emits them
as **one** ``assistant/message`` (Provenance ``openai``/``responses``/model) when the
response is over, followed by the ``tool/result`` of each of its calls: the history
Codex sends next (one response's items, then the calls' outputs). Each item is also
logged as it arrives (``assistant/chunk``, ``tool/call``, ``tool/output``) so a UI sees
it at once.

When the response is over. A response may ask for several calls at once (parallel
calls): Codex runs them one after the other, in no fixed order, and the first one can
complete before the next one starts, so a tool result does not end the response. It
ends at the per-request usage report (app-server ``thread/tokenUsage/updated``, sent
after the request's calls ran and their raw outputs came), at the next response's first
reasoning / message / web-search item after tool results (``codex exec --json`` has no
per-request mark; also the app-server's fallback), at a user message, or at the turn's
end. The results wait for it (:meth:`CodexCore._release`) and are logged in the order of
the message's calls — the model's order when raw events give it (the raw
``function_call`` items, :meth:`CodexCore._model_order`), else the order the commands
started in; a command's result also waits for its raw ``function_call_output`` when
raw events are on. An input that ends inside a response (``close()``) logs the results
it holds only with raw events (:meth:`CodexCore._settle_results`). Named limit: ``codex
exec --json`` cannot tell a call the next response makes with no reasoning or text
before it from one more call of the same response; such a call joins the message.

Retries. When Codex retries a model request (exec: a top-level ``error`` line
``Reconnecting... 1/1 (...)``; app-server: ``error`` with ``willRetry: true``) the
request is sent again with the same input, and the items the failed attempt had
already completed are emitted **again, under new item ids** (RECIPE.md, run
x_err_no_completed). They are recognised by position and content: after a retry, the
n-th reasoning / agent-message item equal in kind and text to the n-th one of the failed
attempt is a re-emission; so is a web search equal in query and action. It is not kept
twice in the message: the retry's copy replaces the first one (its ids are what later
requests carry). exec logs an item's chunk when the item completes, so a re-emission gets
no second chunk; the app-server streams an item's text as deltas before its completion
says whether it is a re-emission, so its chunks *are* logged again (chunks are log-only:
the message, and the history derived from it, holds the item once). The first item that
differs ends the matching; the failed attempt's items that were never re-emitted are
dropped from the message when the response completes (they were not part of the answer
the model gave), kept (as ``partial``) when the turn fails. Items that never completed
before the failure (app-server: an agent message cut mid-stream) are abandoned: the retry
starts a new item.

Turns bound the items. A turn's end closes what it left open: a call that never got a
result (an interrupt) is forgotten — no ``tool/result`` is made up: the turn ends
``interrupted`` and a renderer gives the call its synthetic error result (rule 6 of
:mod:`adapters._render`), as for the other runtimes' unanswered calls — and the ids of
the items and calls completed in it are forgotten too (``codex exec`` numbers its items
from ``item_0`` again in every run). Within a turn an item completed once is done: a late
``item.started`` / ``item.updated`` / delta, or a repeated completion (lines out of order,
a line sent twice), is kept as ``native/unknown`` (:class:`LateItem`) instead of opening
the item again (a second ``tool/call``, a call part without its result, a second text
part).

Native values of the wrong type never reach a typed event field (the event would encode
but not decode back, and a stored session holding it could not be read): optional fields
are dropped to None (:func:`~adapters._base.str_or_none`,
:func:`~adapters._base.int_or_none`); a delta whose part index is not an
integer, or lies far beyond the parts seen so far (:func:`part_index`), is malformed and
its line kept whole. The typed app-server lines (:mod:`._wire`) are checked by their
decoder already.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Mapping
from itertools import count
from typing import Any, ClassVar, Literal

import msgspec

from adapters._base import Adapter, EventT, int_or_none, split_lines, str_or_none
from adapters.openai_responses._items import result_parts
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    Event,
    NativeUnknownEvent,
    RequestHeaderEvent,
    Source,
    ToolCallEvent,
    ToolResultEvent,
    TurnEndEvent,
    TurnStartEvent,
    TurnStatus,
    Usage,
)
from universal_event.parts import (
    AssistantPart,
    Provenance,
    ResultPart,
    ServerToolCallPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

__all__ = [
    "CODEX_REQUEST_SETTINGS",
    "MAX_INDEX_GAP",
    "CodexCore",
    "LateItem",
    "OpenItem",
    "codex_usage",
    "part_index",
    "text_content",
]

CODEX_REQUEST_SETTINGS: Mapping[str, Any] = {"store": False}
"""What every Codex request to the Responses API carries, whatever the session: ``store:
false`` (the captures' ``requests/*.json``; Codex sets it true only for an Azure
endpoint). Codex keeps the history itself and sends reasoning back with its
``encrypted_content``: its items were never stored, so an item sent back by id alone is
refused ("item not found"). The ``request/header`` of every Codex source carries it (the
Responses renderer then replays reasoning only with its ``encrypted_content``)."""

MAX_INDEX_GAP = 8
"""How far past the parts seen so far a delta's ``summaryIndex`` / ``contentIndex`` may
point (:func:`part_index`). Parts come in order (a ``summaryPartAdded``, or the first
delta, for index ``len``); a small gap is tolerated (an empty part whose notification was
lost), anything further is malformed input."""


class LateItem(ValueError):
    """A line about an item or call this turn has already completed (lines out of order,
    or one sent twice): the adapter keeps the line as ``native/unknown`` (this message is
    its reason) instead of opening the item again."""


def part_index(index: Any, parts: int) -> int:
    """A delta's part index, checked: an int from 0 to ``parts + MAX_INDEX_GAP``.

    Anything else raises (the line is then kept as ``native/unknown``): an index of
    another type cannot say where the text goes, and a huge one made the adapter allocate
    a slot per index up to it (memory exhausted). Rejecting keeps the line whole where
    clamping would put the text into a part it does not belong to; what the message
    loses is only the stream's copy: the item's completion carries the full text.
    """
    if type(index) is not int:
        raise TypeError(f"part index must be an integer, got {type(index).__name__}")
    if not 0 <= index <= parts + MAX_INDEX_GAP:
        raise ValueError(f"part index {index} out of range ({parts} parts so far)")
    return index


_ID_PREFIX = os.urandom(6).hex()
_id_counter = count(10**12)


def _fast_id() -> str:
    """A unique event id: a per-process random prefix and a counter (13 decimal digits).

    ``uuid4().hex`` costs more than the rest of normalising a delta line; this is as
    unique (48 random bits per process, never repeating within it).
    """
    return _ID_PREFIX + str(next(_id_counter))


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def codex_usage(native: Mapping[str, Any], scope: Literal["request", "turn"]) -> Usage:
    """Codex token usage (``snake_case`` in exec/rollout, ``camelCase`` in app-server).

    Codex copies the Responses figures: ``input_tokens`` already includes
    ``cached_input_tokens`` (OpenAI counts cache inside the input), so nothing is added.
    """
    get = native.get
    return Usage(
        input_tokens=_int(get("input_tokens", get("inputTokens"))),
        cache_read_tokens=_int(get("cached_input_tokens", get("cachedInputTokens"))),
        cache_write_tokens=_int(get("cache_write_input_tokens", get("cacheWriteInputTokens"))),
        output_tokens=_int(get("output_tokens", get("outputTokens"))),
        reasoning_tokens=_int(get("reasoning_output_tokens", get("reasoningOutputTokens"))),
        native=dict(native),
        scope=scope,
    )


class OpenItem:
    """A streamed item (app-server) not completed yet: what its deltas have given."""

    __slots__ = ("content", "item_id", "kind", "phase", "summary", "text")

    def __init__(self, kind: Literal["text", "thinking"], item_id: str) -> None:
        self.kind = kind
        self.item_id = item_id
        self.text: list[str] = []
        self.summary: list[list[str]] = []
        self.content: list[list[str]] = []
        self.phase: str | None = None

    def part(self, provenance: Provenance) -> AssistantPart:
        """What arrived so far, as a part (a message cut mid-stream keeps it)."""
        if self.kind == "text":
            return TextPart(text="".join(self.text), item_id=self.item_id, phase=self.phase)
        return ThinkingPart(
            text="".join("".join(chunks) for chunks in self.content),
            summary=["".join(chunks) for chunks in self.summary],
            id=self.item_id,
            provenance=provenance,
        )


@dataclasses.dataclass(slots=True)
class HeldResult:
    """A tool's result not logged yet: its response is not over, an earlier call of the
    message has no result yet, or (raw events on) the text Codex sends the model for it,
    the raw ``function_call_output``, has not come (``content`` None: ``output`` is the
    plain output to fall back on)."""

    native_type: str
    call_id: str
    name: str | None
    content: list[ResultPart] | None
    output: str
    is_error: bool
    exit_code: int | None
    details: dict[str, Any] | None


class CodexCore(Adapter):
    """State and helpers shared by the exec, app-server and rollout normalisers."""

    _holds_results: ClassVar[bool] = True
    """The live dialects log a tool result once the response that asked for it is over
    (:meth:`_tool_result`); the rollout has its results where Codex put them."""

    runtime: ClassVar[str] = "codex"

    def __init__(self, *, session_id: str = "", model: str | None = None) -> None:
        super().__init__(session_id=session_id)
        self.model = model
        """The model, for provenance: given here (``codex exec --json`` never says it)
        or learnt from the stream (app-server ``thread/started``, rollout
        ``turn_context``)."""
        self._turn_open = False
        self._turn_usage: Usage | None = None
        self._parts: list[AssistantPart] = []
        self._keys: list[tuple[str, str] | None] = []
        self._replay: list[int] = []
        self._replay_at = 0
        self._open_items: dict[str, OpenItem] = {}
        self._open_calls: dict[str, str] = {}
        self._done_calls: set[str] = set()
        """Calls of this turn that have their result: a late start is not a new call."""
        self._done_items: set[str] = set()
        """Message / reasoning items of this turn that completed: a late delta, start or
        completion does not open them again."""
        self._output_seen: dict[str, int] = {}
        self._raw_items: dict[str, Mapping[str, Any]] = {}
        self._raw_events = False
        """Raw response items seen (app-server ``rawResponseItem/completed``): a command's
        ``function_call_output`` will follow its ``item/completed``."""
        self._call_rank: dict[str, int] = {}
        """The model's order of its calls (the raw ``function_call`` items' order): the
        order of a message's calls and of their results (:meth:`_model_order`)."""
        self._sent_outputs: dict[str, Mapping[str, Any]] = {}
        self._held: dict[str, HeldResult] = {}
        """Results that came before the response asking for them was over, or before
        their raw ``function_call_output`` (:meth:`_release`)."""
        self._result_order: list[str] = []
        """Calls of the messages emitted whose results are not logged yet, in the message's
        order: the order their results are logged in."""
        self._sources: dict[str | None, Source] = {}
        self._chunk_source: Source | None = None
        self._provenance: Provenance | None = None
        self._header_key: tuple[Any, ...] | None = None
        """(model, system, settings) of the last ``request/header`` written."""

    # ------------------------------------------------------------ envelope

    # The hooks are the functions themselves, not methods calling them: a call less for
    # every event.
    _event_id = staticmethod(_fast_id)

    def _source(
        self, native_type: str | None, native_id: str | None = None, model: str | None = None
    ) -> Source:
        """The ``source`` of an event; the adapter's model unless one is given.

        Without an id the Source (frozen) is shared by every event of a native type.
        """
        if native_id is None and model is None:
            source = self._sources.get(native_type)
            if source is None or source.model != self.model:
                source = Source(runtime=self.runtime, native_type=native_type, model=self.model)
                self._sources[native_type] = source
            return source
        return Source(
            runtime=self.runtime,
            native_type=native_type,
            native_id=native_id,
            model=model or self.model,
        )

    _event_source = _source

    def unknown(self, native_type: str | None, payload: Any, reason: str) -> NativeUnknownEvent:
        """What :meth:`Adapter.unknown` builds, built directly.

        An app-server stream is a fifth status / rate-limit lines, each kept as
        ``native/unknown``: ``make``'s keyword packing and field checks cost three
        times the construction. Same envelope as ``make`` gives (Codex has no
        ``_envelope_defaults``), the per-type ``Source`` shared.
        """
        return NativeUnknownEvent(
            id=_fast_id(),
            session_id=self.session_id,
            ts=time.time() if self._native_time is None else self._native_time,
            source=self._source(native_type),
            turn_id=self.turn_id,
            step=self.step,
            native_type=native_type,
            runtime=self.runtime,
            payload=payload,
            reason=reason,
        )

    def provenance(self) -> Provenance:
        """Codex talks to the Responses API: ``openai``/``responses``/model (one frozen
        instance while the model stays the same)."""
        provenance = self._provenance
        if provenance is None or provenance.model != self.model:
            provenance = self._provenance = Provenance(
                provider="openai", api="responses", model=self.model
            )
        return provenance

    def _settings_header(self, out: list[Event], native_type: str) -> None:
        """``request/header`` of a live stream: the model and what every Codex request
        carries (:data:`CODEX_REQUEST_SETTINGS`), written once the model is known and
        again when it changes. The stream never shows the system prompt, the tools or the
        reasoning settings: they stay unknown (``system`` None, no tools), not made up.
        Without a model (``codex exec --json`` with no ``model=``) nothing is written: a
        header without one would take the model of the session's earlier header away,
        and exec's items carry no ids that ``store`` would decide about."""
        if self.model is not None:
            self._request_header(out, native_type, None, CODEX_REQUEST_SETTINGS)

    def _request_header(
        self,
        out: list[Event],
        native_type: str,
        system: str | None,
        settings: Mapping[str, Any],
    ) -> None:
        """``request/header`` (the model, ``system``, ``settings``), written when one of
        them changed since the last one."""
        key = (self.model, system, settings)
        if key == self._header_key:
            return
        self._header_key = key
        out.append(
            self.make(
                RequestHeaderEvent,
                native_type=native_type,
                provider="openai",
                api="responses",
                model=self.model,
                system=system,
                sampling=dict(settings),
            )
        )

    # ------------------------------------------------------------ JSON lines

    def _feed_lines(self, native: Any, out: list[Event]) -> bool:
        """JSON-lines input (``bytes`` cut anywhere, a ``str`` line, a decoded ``dict``)
        into ``out``; False when ``native`` is none of these."""
        if isinstance(native, bytes | bytearray | memoryview):
            self._raw_lines(self._complete_lines(bytes(native)), out)
        elif isinstance(native, str):
            line = native.encode() + (b"" if native.endswith("\n") else b"\n")
            self._raw_lines(self._complete_lines(line), out)
        elif isinstance(native, Mapping):
            self._line(native, out)
        else:
            return False
        return True

    def _raw_lines(self, complete: bytes, out: list[Event]) -> None:
        """Complete JSON lines (each ending with a newline), one by one."""
        for raw in split_lines(complete):
            self._raw_line(raw, out)

    def _raw_line(self, raw: bytes, out: list[Event], problem: str = "malformed JSON line") -> None:
        """One complete JSON line (``problem`` names what a line that does not decode is)."""
        line = self._json_object(raw, out, problem)
        if line is not None:
            self._line(line, out)

    def _line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        """One decoded line: the dialect's own."""
        raise NotImplementedError

    # ------------------------------------------------------------ turns

    def _start_turn(self, out: list[Event], turn_id: Any, native_type: str) -> None:
        if self._turn_open:
            self._end_turn(out, "interrupted", native_type, error="a new turn started")
        # Every later event carries the turn id: one of another type would poison them all.
        self.turn_id = str_or_none(turn_id) or f"turn_{_fast_id()}"
        self._turn_open = True
        self._turn_usage = None
        out.append(self.make(TurnStartEvent, native_type=native_type))

    def _ensure_turn(self, out: list[Event], native_type: str) -> None:
        """Items before any turn start (a stream joined late): open a turn for them."""
        if not self._turn_open:
            self._start_turn(out, None, native_type)

    def _add_request_usage(self, usage: Usage) -> None:
        total = usage if self._turn_usage is None else self._turn_usage + usage
        self._turn_usage = msgspec.structs.replace(total, scope="turn", native=None)

    def _end_turn(
        self,
        out: list[Event],
        status: TurnStatus,
        native_type: str,
        *,
        usage: Usage | None = None,
        error: str | None = None,
        duration_ms: Any = None,
        release: bool = True,
    ) -> None:
        """Flush the message (``partial`` unless completed), log the results it waited
        for (not with ``release`` False: :meth:`_settle_results`), write ``turn/end``,
        and close what the turn left open (module docstring: no result is made up for a
        call that never got one)."""
        if status == "completed":
            self._flush(out, native_type)
        else:
            self._flush(out, native_type, status="partial", stop_reason=status)
        self._settle_results(out, release)
        out.append(
            self.make(
                TurnEndEvent,
                native_type=native_type,
                status=status,
                usage=usage if usage is not None else self._turn_usage,
                error=error,
                duration_ms=int_or_none(duration_ms),
            )
        )
        self._turn_open = False
        self._turn_usage = None
        self._replay = []
        self._open_items.clear()
        self._open_calls.clear()
        self._done_calls.clear()
        self._done_items.clear()
        self._output_seen.clear()

    # ------------------------------------------------------------ the message

    def _item_done(self, item_id: str) -> None:
        """A message / reasoning item completes; one completed before is a late line."""
        if item_id:
            if item_id in self._done_items:
                raise LateItem(f"item {item_id!r} already completed in this turn")
            self._done_items.add(item_id)

    def _add_part(self, part: AssistantPart, key: tuple[str, str] | None) -> bool:
        """Add a completed item's part; True when it re-emits a failed attempt's item."""
        if self._replay:
            if self._replay_at < len(self._replay) and key is not None:
                index = self._replay[self._replay_at]
                if self._keys[index] == key:
                    self._parts[index] = part
                    self._replay_at += 1
                    if self._replay_at == len(self._replay):
                        self._replay = []
                    return True
            self._drop_unreplayed()
        self._parts.append(part)
        self._keys.append(key)
        return False

    def _drop_unreplayed(self) -> None:
        """The retry's output differs: forget the failed attempt's items it did not repeat."""
        gone = set(self._replay[self._replay_at :])
        self._parts = [p for i, p in enumerate(self._parts) if i not in gone]
        self._keys = [k for i, k in enumerate(self._keys) if i not in gone]
        self._replay = []

    def _retry(self) -> None:
        """Codex will send the request again: the next items may re-emit these."""
        self._replay = [i for i, key in enumerate(self._keys) if key is not None]
        self._replay_at = 0
        self._open_items.clear()

    def _flush(
        self,
        out: list[Event],
        native_type: str,
        *,
        status: Literal["complete", "partial"] = "complete",
        stop_reason: str | None = None,
    ) -> None:
        """Emit the gathered parts as one ``assistant/message`` (nothing when empty)."""
        if status == "complete" and self._replay:
            self._drop_unreplayed()
        if status == "partial":
            provenance = self.provenance()
            for item in self._open_items.values():
                self._parts.append(item.part(provenance))
            self._open_items.clear()
        if not self._parts:
            return
        parts = self._parts
        if self._raw_items:  # only with raw events: spares a call per part without them
            parts = self._model_order([self._with_raw(part) for part in parts])
        parts = [self._with_model(part) for part in parts]
        if self._holds_results:
            self._result_order += [p.id for p in parts if isinstance(p, ToolCallPart)]
        message_id = next((p.item_id for p in parts if isinstance(p, TextPart) and p.item_id), None)
        out.append(
            self.make(
                AssistantMessageEvent,
                native_type=native_type,
                content=parts,
                message_id=message_id,
                provenance=self.provenance(),
                status=status,
                stop_reason=stop_reason,
            )
        )
        self._parts = []
        self._keys = []
        self._replay = []

    def _model_order(self, parts: list[AssistantPart]) -> list[AssistantPart]:
        """The message's calls in the model's order (its raw ``function_call`` items').

        Codex runs a response's calls one by one, in no fixed order: the commands start
        (and are added to the message) in the order they happen to run, which is not
        always the order the model gave them in, the order of the next request."""
        slots = [i for i, part in enumerate(parts) if isinstance(part, ToolCallPart)]
        if len(slots) < 2:
            return parts
        rank = self._call_rank
        calls = [part for part in parts if isinstance(part, ToolCallPart)]
        calls.sort(key=lambda call: rank.get(call.id, len(rank)))  # stable: unranked last
        ordered = list(parts)
        for slot, call in zip(slots, calls, strict=True):
            ordered[slot] = call
        return ordered

    def _with_model(self, part: AssistantPart) -> AssistantPart:
        """A part made before the model was known gets it now (provenance rule 1: the
        renderer replays reasoning only to the same provider, api *and* model)."""
        provenance = getattr(part, "provenance", None)
        if self.model is None or provenance is None or provenance.model is not None:
            return part
        return msgspec.structs.replace(part, provenance=self.provenance())

    def _with_raw(self, part: AssistantPart) -> AssistantPart:
        """Fill in what only the raw Responses item has (app-server raw item events)."""
        if not self._raw_items:
            return part
        if isinstance(part, ToolCallPart):
            raw = self._raw_items.get(part.id)
            if raw is not None and raw.get("type") == "function_call":
                arguments, arguments_raw = exact_arguments(raw)
                return ToolCallPart(
                    id=part.id,
                    name=str(raw.get("name") or part.name),
                    arguments=arguments,
                    arguments_raw=arguments_raw,
                    item_id=str_or_none(raw.get("id")),
                    provenance=self.provenance(),
                )
        if isinstance(part, ThinkingPart) and part.id:
            raw = self._raw_items.get(part.id)
            encrypted = None if raw is None else str_or_none(raw.get("encrypted_content"))
            if encrypted:
                return msgspec.structs.replace(part, encrypted_content=encrypted)
        return part

    def _chunk(
        self,
        out: list[Event],
        native_type: str,
        item_id: str | None,
        kind: Literal["text", "thinking", "summary"],
        delta: str,
        index: int = 0,
    ) -> None:
        # One event per streamed delta: built here rather than through ``make`` (its
        # keyword packing costs as much as the rest of the line); the same envelope.
        # An item's deltas come in a run: they share one (frozen) Source, which also
        # spares the garbage collector an object per chunk.
        source = self._chunk_source
        if (
            source is None
            or source.native_id != item_id
            or source.native_type != native_type
            or source.model != self.model
        ):
            source = self._chunk_source = self._source(native_type, item_id)
        out.append(
            AssistantChunkEvent(
                id=_fast_id(),
                session_id=self.session_id,
                ts=time.time() if self._native_time is None else self._native_time,
                source=source,
                turn_id=self.turn_id,
                message_id=item_id,
                kind=kind,
                delta=delta,
                index=index,
            )
        )

    # ------------------------------------------------------------ tools

    def _tool_call(
        self,
        out: list[Event],
        native_type: str,
        call_id: str,
        name: str,
        arguments: Any,
        kind: str,
    ) -> None:
        """``tool/call`` (the runtime started it) and its part in the message; a call this
        turn already has the result of is not started again (:class:`LateItem`)."""
        if call_id in self._open_calls:
            return
        if call_id in self._done_calls:
            raise LateItem(f"tool call {call_id!r} already has its result in this turn")
        raw = self._raw_items.get(call_id)
        if raw is not None and raw.get("type") == "function_call":
            name = str(raw.get("name") or name)
        self._open_calls[call_id] = name
        out.append(
            self.call_event(
                ToolCallEvent, native_type, call_id, name=name, arguments=arguments, kind=kind
            )
        )
        part = ToolCallPart(
            id=call_id, name=name, arguments=arguments, provenance=self.provenance()
        )
        self._add_part(part, None)

    def call_event(
        self, event_type: type[EventT], native_type: str, call_id: str, **fields: Any
    ) -> EventT:
        """An event about one tool call (``tool/call``, ``tool/output``, ``tool/result``):
        the call id is also the native id."""
        return self.make(
            event_type, native_type=native_type, native_id=call_id, call_id=call_id, **fields
        )

    def _tool_result(
        self,
        out: list[Event],
        native_type: str,
        call_id: str,
        content: list[ResultPart] | None,
        *,
        is_error: bool,
        exit_code: int | None = None,
        details: dict[str, Any] | None = None,
        output: str = "",
    ) -> None:
        """A tool's ``tool/result``, logged after the message that asked for it.

        A response's calls are one message and their results follow it, in the order
        of the calls (what the next request holds): the result waits (:meth:`_release`)
        until the response is over and the results of the calls before it are logged.
        ``content`` None: the text the model is sent is still to come (a command's raw
        ``function_call_output``), ``output`` is what to fall back on.
        """
        name = self._open_calls.pop(call_id, None)
        self._done_calls.add(call_id)
        if call_id not in self._result_order and not self._asking(call_id):
            self._result_order.append(call_id)  # its message is logged already (or none is)
        held = HeldResult(native_type, call_id, name, content, output, is_error, exit_code, details)
        self._held[call_id] = held
        if self._result_order and self._result_order[0] == call_id:
            self._release(out)

    def _asking(self, call_id: str) -> bool:
        """Whether the message being gathered has the call (its results wait for it)."""
        return any(isinstance(p, ToolCallPart) and p.id == call_id for p in self._parts)

    def _release(self, out: list[Event], *, final: bool = False) -> None:
        """Log the held results whose turn has come: in the order of their messages'
        calls, each once the results before it are logged and its text is known.

        ``final``: the response is over for good (the next one starts, the turn ends):
        a result still waiting for its raw ``function_call_output`` gets the plain output,
        and a call without a result is no longer waited for (no result is made up)."""
        order, held = self._result_order, self._held
        while order:
            result = held.get(order[0])
            if result is None or result.content is None:
                if not final:
                    return
                if result is None:
                    order.pop(0)
                    continue
            order.pop(0)
            del held[result.call_id]
            self._log_result(out, result)
        if final and held:  # results of calls no message asked for (a stream joined late)
            for result in list(held.values()):
                self._log_result(out, result)
            held.clear()

    def _settle_results(self, out: list[Event], release: bool) -> None:
        """The response is over for good: log the held results (:meth:`_release`,
        ``final``), or with ``release`` False forget them.

        ``release`` False is the input's end (``close()``, not a line) without raw
        events. The input may end before the response does — an import of a capture
        still being written, imported again once it has grown: the results it holds then
        are logged by the line that ends the response, and logged at this end as well
        they would be in the log twice (an import's events are numbered by the line that
        completed them; only a cut *message* is replaced by the grown one). So without
        raw events they are not logged there: a stream cut there leaves the calls
        unanswered, as an interrupt does (the partial message has them; a renderer
        answers them, rule 6). With raw events the results waiting for their raw output
        are logged with the plain output, as before: a runtime killed after its command
        ran keeps the result.
        """
        if release:
            self._release(out, final=True)
        else:
            self._held.clear()
            self._result_order.clear()

    def _log_result(self, out: list[Event], result: HeldResult) -> None:
        content = result.content
        if content is None:
            content = text_content(result.output)
        out.append(
            self.call_event(
                ToolResultEvent,
                result.native_type,
                result.call_id,
                name=result.name,
                content=content,
                is_error=result.is_error,
                exit_code=result.exit_code,
                details=result.details,
            )
        )

    def _response_over(self, out: list[Event], native_type: str) -> None:
        """The model request is over (app-server ``thread/tokenUsage/updated``): its
        message, then the results that are ready."""
        self._flush(out, native_type)
        if self._result_order:
            self._release(out)

    def _response_item_done(self, out: list[Event], native_type: str, item_id: str) -> None:
        """An item that starts a new model response completes (:meth:`_item_done`, then
        :meth:`_next_response`)."""
        self._item_done(item_id)
        self._next_response(out, native_type)

    def _next_response(self, out: list[Event], native_type: str) -> None:
        """An item that starts a new model response (reasoning, a message, a web search
        after tool results) or a user message: the last response is over for good."""
        if self._held or self._result_order:
            self._flush(out, native_type)
            self._release(out, final=True)

    # ------------------------------------------------------------ command output as sent

    def _command_result(
        self,
        out: list[Event],
        native_type: str,
        call_id: str,
        output: str,
        *,
        is_error: bool,
        exit_code: int | None,
        details: dict[str, Any],
    ) -> None:
        """A command's ``tool/result``: the text the model was sent when it is known.

        Codex does not send the model the plain output: it wraps it (``Chunk ID: …\nWall
        time: …\nProcess exited with code 0\nOriginal token count: 1\nOutput:\n2\n``).
        That exact text is the raw ``function_call_output`` item, which the app-server
        sends (raw events on) *after* the command's ``item/completed`` — after all the
        response's commands completed, before the next request: the result waits for it
        (:meth:`_sent_output`) and falls back to the plain output when the next response
        starts or the turn ends without it. The plain output stays in
        ``details["output"]``, the exit code in ``exit_code``.
        """
        details = {**details, "output": output}
        sent = self._sent_outputs.pop(call_id, None)
        if sent is not None:
            content: list[ResultPart] | None = result_parts(sent.get("output"))
        elif self._raw_events:
            content = None  # the raw output item follows
        else:
            content = text_content(output)
        self._tool_result(
            out, native_type, call_id, content, is_error=is_error, exit_code=exit_code,
            details=details, output=output,
        )  # fmt: skip

    def _sent_output(self, item: Mapping[str, Any], out: list[Event]) -> None:
        """A raw tool-output item: what the model is sent for a call."""
        call_id = str(item.get("call_id") or "")
        held = self._held.get(call_id)
        if held is None:
            self._sent_outputs[call_id] = item
            return
        if held.content is None:
            held.content = result_parts(item.get("output"))
            if self._result_order and self._result_order[0] == call_id:
                self._release(out)

    def _web_search(
        self, out: list[Event], native_type: str, item_id: str, item: Mapping[str, Any]
    ) -> None:
        """A web search the provider ran: a server-tool part of the message.

        Its replay key is its query and action: a retry re-emits it under a new id like
        the reasoning and messages around it (without a key, the retry's copy was added
        next to the failed attempt's).
        """
        # After tool results, a web search is the next response's.
        self._response_item_done(out, native_type, item_id)
        search = {"query": item.get("query"), "action": item.get("action")}
        part = ServerToolCallPart(
            id=item_id,
            name="web_search",
            input=search,
            native=dict(item),
            provenance=self.provenance(),
        )
        key = msgspec.json.encode(search, order="sorted").decode()
        self._add_part(part, ("web_search", key))


def exact_arguments(item: Mapping[str, Any]) -> tuple[Any, str | None]:
    """A ``function_call`` item's ``(arguments, arguments_raw)``, its text kept exactly.

    Codex forwards the model's argument text as it came (``{"cmd": "…", …}`` with blanks
    from the fake model server and the captures' "fakeresp"), while a renderer writes
    parsed arguments compactly: the text is kept whenever that would change it, so the
    history replays byte for byte.
    """
    from adapters._render import parse_arguments

    return parse_arguments(str(item.get("arguments") or ""))


def text_content(text: str | None) -> list[ResultPart]:
    """A tool's text output as result parts (none for empty output)."""
    return [TextPart(text=text)] if text else []
