"""OpenAI Chat Completions → Universal Events (streamed chunks and whole completions).

:class:`OpenAIChatAdapter` is one conversation's normaliser. ``feed`` takes raw bytes
(an SSE stream, ``data: [DONE]`` included, cut anywhere; or a whole non-streamed
``chat.completion`` / error JSON body), one ``str`` line, a ``dict``, or the SDK's
typed ``ChatCompletionChunk`` / ``ChatCompletion`` (and the events of the SDK's
``chat.completions.stream()`` helper: a ``chunk`` event as its chunk, the others, which
repeat the chunks, skipped). ``close()`` ends the current stream; the adapter may then
be fed the next request's stream.

Policies (what the API leaves open, decided here once):

* **Turns and steps.** Each response (one completion id) is a step: ``step/start``
  before its first event, ``step/end`` after ``[DONE]``, a new completion id, or
  ``close()``. A response whose choice 0 finished with ``tool_calls`` leaves the turn
  open (the caller runs the tools and sends the next request, which is the next step
  of the same turn); any other ending closes it with ``turn/end`` carrying the summed
  usage of its steps. Reuse one adapter across the requests of an agent loop to keep
  them in one turn.
* **``n > 1``.** Every choice is its own ``assistant/message`` (``choice`` set, and
  ``AssistantChunkEvent.choice`` on its chunks). Choice 0 enters the surface; the
  others are logged with ``Surface(op="hidden")`` — they are alternatives, and a
  client continues the conversation with one of them. Their ``message_id`` is
  ``<completion id>:<choice>`` (choice 0 keeps the completion id).
* **Part order** in a message: thinking (``reasoning_content``, or ``reasoning`` as
  OpenRouter names it), text, refusal, tool calls by index. Empty content
  (``""``/``null``) adds no part.
* **Chunks**: one ``assistant/chunk`` per non-empty delta, ``choice`` always set (the
  Chat choice index), ``index`` 0 for text / thinking / refusal and the tool call's
  wire ``index`` for ``tool_arguments`` (its first fragment announces the call with
  ``tool_call_id`` and ``tool_name`` even when its argument text is empty).
* **Citations**: ``url_citation`` annotations (search models) become the text part's
  ``citations`` — from ``message.annotations`` of a whole completion, or from
  ``delta.annotations`` of a stream (a late delta of their own), where each is also a
  ``citation`` chunk.
* **Tool arguments** are assembled per call index (parallel calls interleave) and
  parsed at the end. ``arguments_raw`` keeps the exact text whenever re-encoding the
  parsed value would not reproduce it byte for byte (spacing, escapes, an empty
  string) — the real client sends the exact string back, so a renderer should prefer
  ``arguments_raw`` when present. Text that is not JSON gives ``arguments=None`` with
  ``arguments_raw`` and a ``warning``: ``tool_arguments_truncated`` when
  ``finish_reason`` is ``length`` (or the stream was cut), else
  ``tool_arguments_invalid``.
* **Usage** (the final ``choices: []`` chunk, or ``usage`` on a whole completion, or on
  the last chunk from servers that put it there) becomes one ``usage`` event per
  response. Chunks without choices and without usage (gpt-5's moderation chunk after
  the usage chunk) are kept as ``native/unknown``.
* **Errors.** An error body (``{"error": {...}}``) as an in-stream ``data:`` line or
  fed whole becomes an ``error`` event; inside a response it also ends that response
  as ``failed`` (partial messages, ``step/end``, ``turn/end``). HTTP errors, which the
  adapter never sees on its own, go through :meth:`OpenAIChatAdapter.http_error`
  (status + body) or :meth:`OpenAIChatAdapter.api_error` (the SDK's exception); an
  error before any response does not touch the turn (the caller may retry).
* **Cut streams.** ``close()`` with a choice still unfinished emits the partial
  message (``status="partial"``), an ``error`` (``stream_cut``) and ``interrupted``
  step/turn ends. Malformed or unexpected ``data:`` payloads are kept as
  ``native/unknown`` and the stream goes on; input that is not Chat Completions at all
  raises :class:`~universal_event.errors.AdapterError`.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import AsyncIterable, Iterable
from typing import Any, Literal, TypeVar

import msgspec

from adapters._base import MALFORMED, Adapter, EventT, kept_bytes
from adapters._tap import (
    AsyncTap,
    EventLog,
    Tap,
    atap_sdk_stream,
    finish_open_taps,
    log_session_id,
    tap_sdk_stream,
)
from adapters._usage import openai_usage
from adapters.openai_chat._wire import ChatBody, Choice, Delta, ToolCallFragment, body_decoder
from universal_event._sse_frames import SSEDecoder, SSEFrame
from universal_event.errors import AdapterError, UniversalEventError
from universal_event.events import (
    AssistantChunkEvent,
    AssistantMessageEvent,
    ErrorEvent,
    Event,
    Source,
    StepEndEvent,
    StepStartEvent,
    Surface,
    TurnEndEvent,
    TurnStartEvent,
    TurnStatus,
    Usage,
    UsageEvent,
    WarningEvent,
)
from universal_event.parts import (
    AssistantPart,
    Citation,
    Provenance,
    RefusalPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UserPart,
)

__all__ = ["OpenAIChatAdapter", "atap", "tap"]

RUNTIME = "openai-chat"
CHUNK = "chat.completion.chunk"
COMPLETION = "chat.completion"

_HIDDEN = Surface(op="hidden")
_TURN_CONTINUES = frozenset({"tool_calls", "function_call"})
"""Finish reasons after which the caller runs tools and the turn goes on."""
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_RETRYABLE_CODES = frozenset({"rate_limit_exceeded", "server_error", "overloaded"})

_SDK_HELPER_MODULE = "openai.lib.streaming.chat"
"""Where the events of ``client.chat.completions.stream()`` are defined."""

_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


class _ToolCall:
    """A tool call being assembled from its fragments."""

    __slots__ = ("fragments", "id", "kind", "name")

    def __init__(self, call_id: str, kind: Literal["function", "custom"]) -> None:
        self.id = call_id
        self.name = ""
        self.kind: Literal["function", "custom"] = kind
        self.fragments: list[str] = []


class _ChoiceState:
    """One choice of a response: its deltas so far."""

    __slots__ = (
        "citations",
        "done",
        "finish_reason",
        "index",
        "logprobs",
        "message_id",
        "refusal",
        "text",
        "thinking",
        "tools",
    )

    def __init__(self, index: int, message_id: str) -> None:
        self.index = index
        self.message_id = message_id
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.thinking: list[str] = []
        self.tools: dict[int, _ToolCall] = {}
        self.citations: list[Citation] = []
        self.logprobs: dict[str, list[Any]] | None = None
        self.finish_reason: str | None = None
        self.done = False

    def add_logprobs(self, logprobs: Any) -> None:
        """Concatenate a chunk's ``logprobs`` (``content`` and ``refusal`` token lists)."""
        if not isinstance(logprobs, dict):
            return
        for key, tokens in logprobs.items():
            if isinstance(tokens, list):
                if self.logprobs is None:
                    self.logprobs = {}
                self.logprobs.setdefault(key, []).extend(tokens)


class _Response:
    """One model response (one completion id): a step."""

    __slots__ = (
        "choices",
        "error",
        "failed",
        "id",
        "model",
        "native_type",
        "pending_usage",
        "provenance",
        "service_tier",
    )

    def __init__(self, response_id: str, model: str, native_type: str) -> None:
        self.id = response_id
        self.model = model
        self.native_type = native_type
        self.provenance = Provenance(provider="openai", api="chat", model=model or None)
        self.choices: dict[int, _ChoiceState] = {}
        self.pending_usage: dict[str, Any] | None = None
        self.service_tier: str | None = None
        self.failed = False
        self.error: str | None = None

    def choice(self, index: int) -> _ChoiceState:
        state = self.choices.get(index)
        if state is None:
            message_id = self.id if index == 0 else f"{self.id}:{index}"
            state = self.choices[index] = _ChoiceState(index, message_id)
        return state


class OpenAIChatAdapter(Adapter):
    """Normalises one conversation's Chat Completions traffic (see the module docstring)."""

    runtime = RUNTIME

    def __init__(self, *, session_id: str = "") -> None:
        super().__init__(session_id=session_id)
        self._sse = SSEDecoder()
        self._mode: Literal["sse", "json"] | None = None
        self._json = bytearray()
        self._response: _Response | None = None
        self._turn_open = False
        self._turn_usage: Usage | None = None
        self._id_prefix = uuid.uuid4().hex[:20]
        self._counter = itertools.count()
        self._sources: dict[tuple[str | None, str | None, str | None], Source] = {}

    # ------------------------------------------------------------ public API

    def feed(self, native: Any) -> list[Event]:
        """Normalise raw bytes, a ``str`` line, a ``dict`` or an SDK object."""
        out: list[Event] = []
        if isinstance(native, bytes | bytearray | memoryview):
            self._feed_bytes(bytes(native), out)
        elif isinstance(native, str):
            self._feed_str(native, out)
        elif isinstance(native, dict):
            self._feed_dict(native, out)
        elif hasattr(native, "model_dump"):
            # The SDK's pydantic models: ChatCompletionChunk, ChatCompletion; and the
            # events of its ``chat.completions.stream()`` helper: a ``chunk`` event
            # carries the raw chunk, the others (``content.delta``, ``content.done``,
            # ``tool_calls.function.arguments.done``, ...) only repeat what the chunks say.
            if type(native).__module__.startswith(_SDK_HELPER_MODULE):
                chunk = getattr(native, "chunk", None)
                if getattr(native, "type", None) != "chunk" or chunk is None:
                    return out
                native = chunk
            # ``warnings=False``: the SDK builds its objects unvalidated, and a field of
            # another type than declared (a float ``created``) would make pydantic warn
            # on every dump, where the SDK itself runs clean.
            dumped = native.model_dump(
                mode="json", by_alias=True, exclude_unset=True, warnings=False
            )
            self._feed_dict(dumped, out)
        else:
            raise AdapterError(
                f"cannot normalise a {type(native).__name__!r}: expected bytes, str, dict "
                "or an openai ChatCompletionChunk / ChatCompletion",
                runtime=RUNTIME,
            )
        return out

    def hands_over_call(self, native: Any) -> bool:
        """Whether ``native`` hands the caller a whole tool call before its message is
        logged: ``chat.completions.stream()``'s ``tool_calls.function.arguments.done``
        for a choice that has not finished yet (:mod:`adapters._tap`)."""
        if getattr(native, "type", None) != "tool_calls.function.arguments.done":
            return False
        response = self._response
        return response is not None and any(not s.done for s in response.choices.values())

    def close(self) -> list[Event]:
        """End the current stream: flush buffered input, close what is still open."""
        out: list[Event] = []
        if self._mode == "sse":
            self.handle_frames(self._sse.flush(), self._on_frame, self._sse, out)
        elif self._mode == "json":
            self._drain_json(out, final=True)
        self._sse = SSEDecoder()
        self._mode = None
        if self._response is not None:
            self._end_response(out)
        return out

    def user_prompt(self, content: str | list[UserPart]) -> list[Event]:
        """The user's input as a ``user/message``.

        A response still open (fed without its end, not closed: the caller stopped
        reading) ends first, as :meth:`close` ends it — partial messages, ``interrupted``
        step and turn — and so does a tap of this adapter the caller stopped reading
        (:func:`adapters._tap.finish_open_taps`).
        """
        finish_open_taps(self)
        out = self.close() if self._response is not None or self._mode is not None else []
        out.extend(super().user_prompt(content))
        return out

    def http_error(self, status: int, body: Any) -> list[Event]:
        """Events for an HTTP error response (``body``: bytes, str, dict or None).

        OpenAI error bodies are ``{"error": {"message", "type", "param", "code"}}``
        (recorded: 400 ``unsupported_value``, 400 ``invalid_image_url``, 404
        ``model_not_found``).
        """
        parsed = body
        if isinstance(body, bytes | bytearray | str):
            try:
                parsed = _any_decoder.decode(body)
            except msgspec.DecodeError:
                parsed = body.decode("utf-8", "replace") if not isinstance(body, str) else body
        error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        out: list[Event] = []
        self._on_error(error, out, http_status=status, native=parsed)
        return out

    def api_error(self, exc: BaseException) -> list[Event]:
        """Events for an exception the ``openai`` SDK raised (HTTP or in-stream error).

        The SDK's ``APIStatusError.body`` and in-stream ``APIError.body`` already hold the
        inner ``error`` object; connection errors and timeouts have no body.
        """
        status = getattr(exc, "status_code", None)
        body = getattr(exc, "body", None)
        out: list[Event] = []
        if body is None:
            body = {"message": str(exc), "code": type(exc).__name__}
            retry = status is None  # connection errors and timeouts
            self._on_error(body, out, http_status=status, native=None, retryable=retry)
        else:
            # ``native`` is the whole error body, as :meth:`http_error` keeps it.
            self._on_error(body, out, http_status=status, native={"error": body})
        return out

    # ------------------------------------------------------------ input kinds

    def _feed_bytes(self, data: bytes, out: list[Event]) -> None:
        if self._mode is None:
            head = data.lstrip()[:1]
            if not head:
                return
            # A whole non-streamed body starts with "{"; an SSE stream with a field name.
            self._mode = "json" if head == b"{" else "sse"
        if self._mode == "json":
            self._json += data
            self._drain_json(out, final=False)
            return
        self.handle_frames(self._sse.feed(data), self._on_frame, self._sse, out)

    def _feed_str(self, line: str, out: list[Event]) -> None:
        if "\n" in line.strip():
            self._feed_bytes(line.encode(), out)
            return
        line = line.strip()
        if not line or line.startswith((":", "event:", "id:", "retry:")):
            return
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload == "[DONE]":
                self._on_done(out)
            else:
                self._on_payload(payload.encode(), out)
        elif line.startswith("{"):
            self._on_payload(line.encode(), out)
        else:
            raise AdapterError(
                f"a str must be an SSE line or a JSON object, got {line[:40]!r}",
                runtime=RUNTIME,
            )

    def _feed_dict(self, native: dict[str, Any], out: list[Event]) -> None:
        try:
            body = msgspec.convert(native, ChatBody)
        except msgspec.ValidationError as exc:
            out.append(self._unknown(native, f"unexpected shape: {exc}"))
            return
        self._on_body(body, out, native)

    def _drain_json(self, out: list[Event], *, final: bool) -> None:
        """Decode a buffered whole JSON body once it is complete."""
        data = bytes(self._json).strip()
        if not data or (not final and not data.endswith(b"}")):
            return
        try:
            body = body_decoder.decode(data)
        except msgspec.ValidationError as exc:
            self._json.clear()
            out.append(self._unknown(_any_decoder.decode(data), f"unexpected shape: {exc}"))
            return
        except msgspec.DecodeError as exc:
            if not final:
                return  # more bytes to come
            self._json.clear()
            self._drain_json_lines(data, exc, out)
            return
        self._json.clear()
        self._on_body(body, out, data)

    def _drain_json_lines(self, data: bytes, error: Exception, out: list[Event]) -> None:
        """JSON lines of chunks (one per line); otherwise the input is not JSON at all."""
        lines = [line for line in data.splitlines() if line.strip()]
        try:
            _any_decoder.decode(lines[0])
        except msgspec.DecodeError:
            raise AdapterError(
                f"input is neither SSE nor a Chat Completions JSON body: {error}",
                runtime=RUNTIME,
            ) from None
        for line in lines:
            try:
                self._on_payload(line, out)
            except UniversalEventError:
                raise
            except MALFORMED as exc:
                out.append(self.malformed(None, kept_bytes(line), exc))

    # ------------------------------------------------------------ SSE and payloads

    def _on_frame(self, frame: SSEFrame, out: list[Event]) -> None:
        data = frame.data
        if not data:
            return
        if data == b"[DONE]":
            self._on_done(out)
        elif frame.event == "error":
            # Not sent by api.openai.com (errors arrive as a plain ``data: {"error": ..}``),
            # but some compatible servers name the frame.
            try:
                payload = _any_decoder.decode(data)
            except msgspec.DecodeError:
                payload = data.decode("utf-8", "replace")
            error = payload.get("error", payload) if isinstance(payload, dict) else payload
            self._on_error(error, out, http_status=None, native=payload)
        else:
            self._on_payload(data, out)

    def _on_payload(self, data: bytes, out: list[Event]) -> None:
        try:
            body = body_decoder.decode(data)
        except msgspec.ValidationError as exc:
            out.append(self._unknown(_any_decoder.decode(data), f"unexpected shape: {exc}"))
            return
        except msgspec.DecodeError as exc:
            out.append(self._unknown(kept_bytes(data), f"invalid JSON: {exc}"))
            return
        self._on_body(body, out, data)

    def _on_body(self, body: ChatBody, out: list[Event], raw: bytes | dict[str, Any]) -> None:
        """Dispatch one decoded chunk / completion / error body."""
        if body.error is not None:
            error = body.error
            self._on_error(error, out, http_status=None, native=_as_object(raw))
            return
        if not body.choices:
            if body.usage is not None:
                self._on_usage(body.usage, out, body.id, body.model, body.service_tier)
            else:
                reason = "chunk without choices or usage (e.g. a moderation result)"
                out.append(self._unknown(_as_object(raw), reason, body.object or None))
            return
        if body.object == COMPLETION or body.choices[0].message is not None:
            self._on_completion(body, out)
            return
        response = self._response_for(body, out)
        response.service_tier = body.service_tier or response.service_tier
        for choice in body.choices:
            self._on_choice_delta(response, choice, out)
        if body.usage is not None:
            # Some servers (vLLM continuous usage stats) put cumulative usage on
            # content chunks; the last one wins.
            response.pending_usage = body.usage

    def _on_done(self, out: list[Event]) -> None:
        if self._response is not None:
            self._end_response(out)

    # ------------------------------------------------------------ responses and steps

    def _response_for(self, body: ChatBody, out: list[Event]) -> _Response:
        response = self._response
        if response is not None and (not body.id or body.id == response.id):
            return response
        if response is not None:
            self._end_response(out)  # a new completion id without [DONE] in between
        return self._begin_response(body.id, body.model, CHUNK, out)

    def _begin_response(
        self, response_id: str, model: str, native_type: str, out: list[Event]
    ) -> _Response:
        if not response_id:
            # Some compatible servers omit the id; the message still needs one.
            response_id = f"chatcmpl-{self._id_prefix}{next(self._counter):x}"
        if not self._turn_open:
            self._turn_open = True
            self._turn_usage = None
            self.turn_id = f"turn-{self._id_prefix}{next(self._counter):x}"
            self.step = 0
            out.append(
                self.make(
                    TurnStartEvent, native_type=native_type, native_id=response_id, model=model
                )
            )
        else:
            self.step = 0 if self.step is None else self.step + 1
        response = self._response = _Response(response_id, model, native_type)
        out.append(
            self.make(StepStartEvent, native_type=native_type, native_id=response_id, model=model)
        )
        return response

    def _end_response(self, out: list[Event]) -> None:
        """Finish the open response: partial messages, usage, ``step/end``, maybe ``turn/end``."""
        response = self._response
        assert response is not None
        self._response = None
        unfinished = [state for state in response.choices.values() if not state.done]
        for state in unfinished:
            self._emit_message(response, state, out, partial=True)
        if unfinished and not response.failed:
            indexes = ", ".join(str(state.index) for state in unfinished)
            out.append(
                self._make(
                    response,
                    ErrorEvent,
                    message=f"stream ended before choice(s) {indexes} finished",
                    code="stream_cut",
                    retryable=True,
                )
            )
        if response.pending_usage is not None:
            self._on_usage(
                response.pending_usage, out, response.id, response.model, response.service_tier
            )
        status: TurnStatus = (
            "failed" if response.failed else "interrupted" if unfinished else "completed"
        )
        first = response.choices.get(0) or next(iter(response.choices.values()), None)
        stop_reason = first.finish_reason if first is not None else None
        out.append(self._make(response, StepEndEvent, status=status, stop_reason=stop_reason))
        if status != "completed" or stop_reason not in _TURN_CONTINUES:
            out.append(
                self._make(
                    response,
                    TurnEndEvent,
                    status=status,
                    usage=self._turn_usage,
                    stop_reason=stop_reason,
                    error=response.error,
                )
            )
            self._turn_open = False
            self._turn_usage = None
        self._sources.clear()

    def _on_completion(self, body: ChatBody, out: list[Event]) -> None:
        """A whole (non-streamed) ``chat.completion``: one step at once."""
        if self._response is not None:
            self._end_response(out)
        response = self._begin_response(body.id, body.model, COMPLETION, out)
        response.service_tier = body.service_tier
        for choice in body.choices:
            state = response.choice(choice.index)
            message = choice.message or Delta()
            self._take_message(response, state, message, out)
            state.add_logprobs(choice.logprobs)
            state.finish_reason = choice.finish_reason
            self._emit_message(response, state, out, partial=False)
        if body.usage is not None:
            response.pending_usage = body.usage
        self._end_response(out)

    def _take_message(
        self, response: _Response, state: _ChoiceState, message: Delta, out: list[Event]
    ) -> None:
        thinking = message.reasoning_content or message.reasoning
        if thinking:
            state.thinking.append(thinking)
        if message.content:
            state.text.append(message.content)
        if message.refusal:
            state.refusal.append(message.refusal)
        for position, call in enumerate(message.tool_calls or ()):
            index = call.index if call.index is not None else position
            self._on_tool_fragment(response, state, call, out, index=index, stream=False)
        if isinstance(message.annotations, list):
            state.citations.extend(_citation(item) for item in message.annotations)
        self._keep_extras(response, message, out)

    def _keep_extras(self, response: _Response, delta: Delta, out: list[Event]) -> None:
        """Fields with no event of their own (legacy ``function_call``, ``audio``)."""
        if delta.function_call is not None:
            payload = {"function_call": delta.function_call}
            out.append(self._unknown(payload, "legacy function_call (not assembled)", CHUNK))
        if delta.audio is not None:
            out.append(self._unknown({"audio": delta.audio}, "audio output", CHUNK))

    # ------------------------------------------------------------ deltas

    def _on_choice_delta(self, response: _Response, choice: Choice, out: list[Event]) -> None:
        state = response.choice(choice.index)
        delta = choice.delta
        if delta is not None:
            thinking = delta.reasoning_content or delta.reasoning
            if thinking:
                state.thinking.append(thinking)
                out.append(self._chunk(response, state, "thinking", thinking))
            if delta.content:
                state.text.append(delta.content)
                out.append(self._chunk(response, state, "text", delta.content))
            if delta.refusal:
                state.refusal.append(delta.refusal)
                out.append(self._chunk(response, state, "refusal", delta.refusal))
            if delta.tool_calls:
                for fragment in delta.tool_calls:
                    self._on_tool_fragment(response, state, fragment, out, None, stream=True)
            if isinstance(delta.annotations, list):
                # Search models send the message's url_citations in a late delta of
                # their own: kept on the text part, as on a whole message.
                for annotation in delta.annotations:
                    cited = _citation(annotation)
                    state.citations.append(cited)
                    out.append(self._chunk(response, state, "citation", "", citation=cited))
            if delta.function_call is not None or delta.audio is not None:
                self._keep_extras(response, delta, out)
        if choice.logprobs is not None:
            state.add_logprobs(choice.logprobs)
        if choice.finish_reason is not None and not state.done:
            state.finish_reason = choice.finish_reason
            self._emit_message(response, state, out, partial=False)

    def _on_tool_fragment(
        self,
        response: _Response,
        state: _ChoiceState,
        fragment: ToolCallFragment,
        out: list[Event],
        index: int | None,
        *,
        stream: bool,
    ) -> None:
        if index is None:
            index = fragment.index
        if index is None:
            # Servers that omit ``index``: a new id starts a call, else the last call goes on.
            known = {call.id for call in state.tools.values()}
            if fragment.id and fragment.id not in known:
                index = len(state.tools)
            else:
                index = max(state.tools, default=0)
        call = state.tools.get(index)
        first = call is None
        if call is None:
            kind: Literal["function", "custom"] = (
                "custom" if fragment.custom is not None or fragment.type == "custom" else "function"
            )
            call = state.tools[index] = _ToolCall(fragment.id or "", kind)
        if fragment.id and not call.id:
            call.id = fragment.id
        name, text = None, None
        if fragment.function is not None:
            name, text = fragment.function.name, fragment.function.arguments
        elif fragment.custom is not None:
            name, text = fragment.custom.name, fragment.custom.input
        if name and not call.name:
            call.name = name
        if text:
            call.fragments.append(text)
        if stream and (text or first):
            out.append(
                self._chunk(
                    response,
                    state,
                    "tool_arguments",
                    text or "",
                    index=index,
                    tool_call_id=call.id or None,
                    tool_name=call.name or None,
                )
            )

    def _chunk(
        self,
        response: _Response,
        state: _ChoiceState,
        kind: Literal["text", "thinking", "refusal", "tool_arguments", "citation"],
        delta: str,
        *,
        index: int = 0,
        tool_call_id: str | None = None,
        tool_name: str | None = None,
        citation: Citation | None = None,
    ) -> AssistantChunkEvent:
        """The hot path: one ``assistant/chunk`` per delta, built without ``make``'s kwargs."""
        return AssistantChunkEvent(
            id=f"{self._id_prefix}{next(self._counter):x}",
            session_id=self.session_id,
            ts=time.time(),
            turn_id=self.turn_id,
            step=self.step,
            source=self._source(CHUNK, response.id, response.model),
            message_id=state.message_id,
            index=index,
            kind=kind,
            delta=delta,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            citation=citation,
            choice=state.index,
        )

    # ------------------------------------------------------------ messages

    def _emit_message(
        self, response: _Response, state: _ChoiceState, out: list[Event], *, partial: bool
    ) -> None:
        state.done = True
        parts: list[AssistantPart] = []
        if state.thinking:
            parts.append(ThinkingPart(text="".join(state.thinking), provenance=response.provenance))
        if state.text:
            parts.append(TextPart(text="".join(state.text), citations=state.citations))
        if state.refusal:
            parts.append(RefusalPart(text="".join(state.refusal)))
        truncated = partial or state.finish_reason == "length"
        for index in sorted(state.tools):
            call = state.tools[index]
            part, warning = self._tool_part(response, state, index, call, truncated)
            parts.append(part)
            if warning is not None:
                out.append(warning)
        out.append(
            self._make(
                response,
                AssistantMessageEvent,
                content=parts,
                message_id=state.message_id,
                provenance=response.provenance,
                stop_reason=state.finish_reason,
                status="partial" if partial else "complete",
                surface=None if state.index == 0 else _HIDDEN,
                choice=state.index,
                logprobs=state.logprobs,
            )
        )

    def _tool_part(
        self,
        response: _Response,
        state: _ChoiceState,
        index: int,
        call: _ToolCall,
        truncated: bool,
    ) -> tuple[ToolCallPart, WarningEvent | None]:
        raw = "".join(call.fragments)
        call_id = call.id or f"{state.message_id}-call-{index}"  # servers that omit ids
        if call.kind == "custom":
            part = ToolCallPart(id=call_id, name=call.name, arguments_raw=raw, kind="custom")
            return part, None
        try:
            # An empty string: a call without arguments (some servers omit them).
            arguments = _any_decoder.decode(raw) if raw else {}
        except msgspec.DecodeError:
            code = "tool_arguments_truncated" if truncated else "tool_arguments_invalid"
            why = "cut by the token limit" if truncated else "not valid JSON"
            warning = self._make(
                response,
                WarningEvent,
                code=code,
                message=f"arguments of tool call {call_id!r} ({call.name!r}) are {why}; "
                "kept as arguments_raw",
                details={"call_id": call_id, "finish_reason": state.finish_reason},
            )
            part = ToolCallPart(id=call_id, name=call.name, arguments=None, arguments_raw=raw)
            return part, warning
        exact = _encoder.encode(arguments) == raw.encode()
        part = ToolCallPart(
            id=call_id, name=call.name, arguments=arguments, arguments_raw=None if exact else raw
        )
        return part, None

    # ------------------------------------------------------------ usage and errors

    def _on_usage(
        self,
        native: dict[str, Any],
        out: list[Event],
        response_id: str,
        model: str,
        service_tier: str | None,
    ) -> None:
        response = self._response
        if response is not None:
            response.pending_usage = None
            service_tier = service_tier or response.service_tier
        usage = openai_usage(native)
        self._turn_usage = usage if self._turn_usage is None else self._turn_usage + usage
        out.append(
            self.make(
                UsageEvent,
                native_type=CHUNK,
                native_id=response_id or None,
                model=model or None,
                usage=usage,
                message_id=response_id or None,
                service_tier=service_tier,
            )
        )

    def _on_error(
        self,
        error: Any,
        out: list[Event],
        *,
        http_status: int | None,
        native: Any,
        retryable: bool | None = None,
    ) -> None:
        message, code = _error_fields(error)
        if retryable is None:
            retryable = (
                http_status in _RETRYABLE_STATUS
                or (http_status is not None and http_status >= 500)
                or code in _RETRYABLE_CODES
            )
        response = self._response
        out.append(
            self.make(
                ErrorEvent,
                native_type="error",
                native_id=response.id if response is not None else None,
                message=message,
                code=code,
                retryable=retryable,
                http_status=http_status,
                native=native,
            )
        )
        if response is not None:
            response.failed = True
            response.error = message
            self._end_response(out)

    # ------------------------------------------------------------ helpers

    def _make(self, response: _Response, event_type: type[EventT], **fields: Any) -> EventT:
        return self.make(
            event_type,
            native_type=response.native_type,
            native_id=response.id,
            model=response.model or None,
            **fields,
        )

    def _source(self, native_type: str | None, native_id: str | None, model: str | None) -> Source:
        key = (native_type, native_id, model or None)
        source = self._sources.get(key)
        if source is None:
            source = self._sources[key] = Source(
                runtime=RUNTIME, native_type=native_type, native_id=native_id, model=model or None
            )
        return source

    def _unknown(self, payload: Any, reason: str, native_type: str | None = None) -> Event:
        if native_type is None and isinstance(payload, dict):
            kind = payload.get("object") or payload.get("type")
            native_type = kind if isinstance(kind, str) else None
        return self.unknown(native_type, payload, reason)


def _as_object(raw: bytes | dict[str, Any]) -> Any:
    return _any_decoder.decode(raw) if isinstance(raw, bytes) else raw


def _error_fields(error: Any) -> tuple[str, str | None]:
    """``(message, code)`` of an OpenAI error object (or whatever a server sent)."""
    if isinstance(error, dict):
        message = error.get("message")
        code = error.get("code") or error.get("type")
        text = message if isinstance(message, str) and message else "unknown error"
        return text, None if code is None else str(code)
    if isinstance(error, str) and error:
        return error, None
    return "unknown error", None


def _citation(annotation: Any) -> Citation:
    """A Chat ``url_citation`` annotation (search models) as a :class:`Citation`."""
    if not isinstance(annotation, dict):
        return Citation(kind="unknown", native={"value": annotation})
    kind = str(annotation.get("type") or "unknown")
    detail = annotation.get(kind)
    detail = detail if isinstance(detail, dict) else {}
    return Citation(
        kind=kind,
        url=detail.get("url"),
        title=detail.get("title"),
        start_index=detail.get("start_index"),
        end_index=detail.get("end_index"),
        native=annotation,
    )


# ---------------------------------------------------------------- tap

T = TypeVar("T")


def tap(stream: Iterable[T], log: EventLog, *, adapter: OpenAIChatAdapter | None = None) -> Tap[T]:
    """Iterate an ``openai`` Chat stream unchanged while its events go to ``log``.

    ``for chunk in tap(client.chat.completions.create(..., stream=True), log): ...``
    (or the SDK's ``client.chat.completions.stream(...)`` helper: its ``chunk`` events
    are logged as the chunks they carry, the events it derives from them are not logged
    again). The generic :func:`adapters._tap.tap` (checkpoints, ``close()`` at the end;
    ``with tap(...) as chunks:`` finishes a stream left early at the block's end) plus
    one Chat rule: an error the SDK raises mid-stream (``data: {"error": ...}`` becomes
    ``openai.APIError``; a dropped connection ``APIConnectionError``) is logged as an
    ``error`` event before it propagates. Pass the conversation's ``adapter`` to keep
    an agent loop's requests in one turn.
    """
    return tap_sdk_stream(stream, adapter or OpenAIChatAdapter(session_id=log_session_id(log)), log)


def atap(
    stream: AsyncIterable[T], log: EventLog, *, adapter: OpenAIChatAdapter | None = None
) -> AsyncTap[T]:
    """:func:`tap` for ``AsyncOpenAI`` streams (``async for``)."""
    return atap_sdk_stream(
        stream, adapter or OpenAIChatAdapter(session_id=log_session_id(log)), log
    )
