"""Scripted fake model servers on loopback: Anthropic Messages, OpenAI Responses and Chat.

Real runtimes (Claude Code, Codex) are driven offline against these: each test (or the
demo) scripts the model's turns — text, thinking, a shell tool call, an HTTP error, a
mid-stream close — and reads back every request the runtime sent. The server binds
127.0.0.1 on an ephemeral port and nothing else; it never makes a request itself.

One script serves all three APIs: a :class:`Reply` is rendered as the SSE stream of the
API that was called, so the same scenario can be played to Claude Code (Messages) and
to Codex (Responses).
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "CutStream",
    "FakeModelServer",
    "HttpError",
    "RecordedRequest",
    "Reply",
    "ShellCall",
    "Stall",
    "anthropic_blocks",
    "demo_responder",
]


@dataclass(frozen=True)
class ShellCall:
    """The model asks the runtime to run a shell command (Claude: Bash; Codex: exec_command)."""

    command: str
    description: str = "Run a shell command"


@dataclass(frozen=True)
class Reply:
    """One model response: optional thinking, optional text, optional shell calls;
    ``input_tokens`` is the usage it reports (a runtime compacts past its limit)."""

    text: str = ""
    thinking: str = ""
    calls: Sequence[ShellCall] = ()
    input_tokens: int = 100


@dataclass(frozen=True)
class HttpError:
    """Answer with an HTTP error status and the API's error body."""

    status: int = 500
    message: str = "Internal server error"


@dataclass(frozen=True)
class CutStream:
    """Start streaming ``text`` then close the connection without finishing."""

    text: str = "This answer will be cut"


@dataclass(frozen=True)
class Stall:
    """Hold the request ``seconds`` before answering with ``then`` (a runtime waits)."""

    seconds: float
    then: Reply | HttpError | CutStream = Reply(text="Done after a stall.")


Step = Reply | HttpError | CutStream | Stall

Responder = Callable[[str, dict[str, Any]], Step]
"""Answers a main request from its body: ``(api, body) -> step`` (instead of a script)."""


@dataclass(frozen=True)
class RecordedRequest:
    """A request the runtime sent: path, headers (secrets redacted) and parsed body."""

    api: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    step: Step | None
    """The scripted step that answered it (``None`` for side requests)."""
    sent: list[dict[str, Any]] = field(default_factory=list)
    """What the server answered: the SSE events' data in order (a whole JSON body as
    its only element when not streamed; empty for an HTTP error)."""


@dataclass
class _Script:
    steps: list[Step]
    default: Reply
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self) -> Step:
        with self.lock:
            return self.steps.pop(0) if self.steps else self.default


_REDACTED = {"x-api-key", "authorization", "cookie"}
_counter = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


class FakeModelServer:
    """A loopback HTTP server answering ``/v1/messages``, ``/v1/responses``, ``/v1/chat/completions``.

    Use as a context manager; ``url`` is ``http://127.0.0.1:<port>``; ``requests`` holds
    every request received, in order. Requests that are not the runtime's main model
    call (no tools offered, e.g. Claude Code's side queries) get ``side_reply`` and do
    not consume the script.
    """

    def __init__(
        self,
        steps: Sequence[Step] = (),
        *,
        default: Reply | None = None,
        model: str = "fake-model",
        side_reply: str = "OK",
        delay: float = 0.0,
        responder: Responder | None = None,
    ) -> None:
        self._script = _Script(list(steps), default or Reply(text="Done."))
        self.responder = responder
        """When set, answers every main request (the script is not used)."""
        self.model = model
        self.side_reply = side_reply
        self.delay = delay
        self.requests: list[RecordedRequest] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> FakeModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def model_requests(self, api: str | None = None) -> list[RecordedRequest]:
        """The requests that consumed a scripted step (optionally for one API)."""
        return [r for r in self.requests if r.step is not None and (api is None or r.api == api)]

    # ------------------------------------------------------------------ HTTP plumbing

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_GET(self) -> None:
                self._json(200, {"object": "list", "data": [], "models": []})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_unparsed": raw.decode("utf-8", "replace")}
                path = self.path.split("?", 1)[0]
                api = _api_for(path)
                if api is None:
                    server._record("other", self, body, None)
                    self._json(200, {"input_tokens": 1} if "count_tokens" in path else {})
                    return
                step = server._next_step(api, body) if _is_main_request(api, body) else None
                recorded = server._record(api, self, body, step)
                server._answer(self, api, body, step, recorded.sent)

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def _next_step(self, api: str, body: dict[str, Any]) -> Step:
        if self.responder is not None:
            return self.responder(api, body)
        return self._script.next()

    def _record(
        self, api: str, handler: BaseHTTPRequestHandler, body: Any, step: Step | None
    ) -> RecordedRequest:
        headers = {
            k.lower(): ("<redacted>" if k.lower() in _REDACTED else v)
            for k, v in handler.headers.items()
        }
        recorded = RecordedRequest(api, handler.path, headers, body, step)
        self.requests.append(recorded)
        return recorded

    def _answer(
        self,
        handler: BaseHTTPRequestHandler,
        api: str,
        body: dict[str, Any],
        step: Step | None,
        sent: list[dict[str, Any]],
    ) -> None:
        model = str(body.get("model") or self.model)
        if step is None:
            step = Reply(text=self.side_reply)
        if isinstance(step, Stall):
            time.sleep(step.seconds)
            step = step.then
        if isinstance(step, HttpError):
            _send_json(handler, step.status, _error_body(api, step))
            return
        streaming = bool(body.get("stream")) or api == "responses"
        tool_name = _shell_tool_name(api, body)
        reply = step if isinstance(step, Reply) else Reply(text=step.text)
        if not streaming:
            whole = _whole_response(api, reply, model, tool_name)
            sent.append(whole)
            _send_json(handler, 200, whole)
            return
        events = list(_sse_events(api, reply, model, tool_name))
        if isinstance(step, CutStream):
            events = events[: max(3, len(events) // 2)]
        sent.extend(events)
        _send_sse(handler, events, cut=isinstance(step, CutStream), delay=self.delay)


# ---------------------------------------------------------------------- request shape


def _api_for(path: str) -> str | None:
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    return None


def _is_main_request(api: str, body: dict[str, Any]) -> bool:
    """Claude Code's model calls offer tools; its side queries (titles, ...) do not."""
    return api != "anthropic" or bool(body.get("tools"))


def _shell_tool_name(api: str, body: dict[str, Any]) -> str:
    names = []
    for tool in body.get("tools") or []:
        name = tool.get("name") or (tool.get("function") or {}).get("name")
        if isinstance(name, str):
            names.append(name)
    for candidate in ("Bash", "exec_command", "shell_command", "shell"):
        if candidate in names:
            return candidate
    return "Bash" if api == "anthropic" else "exec_command"


def _shell_arguments(tool_name: str, call: ShellCall) -> dict[str, Any]:
    if tool_name == "Bash":
        return {"command": call.command, "description": call.description}
    if tool_name == "exec_command":
        return {"cmd": call.command, "yield_time_ms": 10000}
    return {"command": ["bash", "-lc", call.command]}


# ---------------------------------------------------------------------- responses


def _error_body(api: str, step: HttpError) -> dict[str, Any]:
    if api == "anthropic":
        kind = "overloaded_error" if step.status == 529 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": step.message}}
    return {"error": {"type": "server_error", "code": "server_error", "message": step.message}}


def _chunks(text: str, size: int = 10) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _usage(api: str, input_tokens: int = 100) -> dict[str, Any]:
    if api == "anthropic":
        return {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 20,
        }
    if api == "responses":
        return {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 20,
            "output_tokens_details": {"reasoning_tokens": 5},
            "total_tokens": input_tokens + 20,
        }
    return {
        "prompt_tokens": input_tokens,
        "completion_tokens": 20,
        "total_tokens": input_tokens + 20,
    }


def _sse_events(api: str, reply: Reply, model: str, tool_name: str) -> Iterator[dict[str, Any]]:
    if api == "anthropic":
        yield from _anthropic_events(reply, model, tool_name)
    elif api == "responses":
        yield from _responses_events(reply, model, tool_name)
    else:
        yield from _chat_events(reply, model, tool_name)


def _anthropic_events(reply: Reply, model: str, tool_name: str) -> Iterator[dict[str, Any]]:
    message: dict[str, Any] = {
        "id": _new_id("msg_01"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_usage("anthropic", reply.input_tokens), "output_tokens": 1},
    }
    yield {"type": "message_start", "message": message}
    index = 0
    if reply.thinking:
        yield {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        }
        for piece in _chunks(reply.thinking, 16):
            yield _delta(index, {"type": "thinking_delta", "thinking": piece})
        signature = "ZmFrZS1zaWduYXR1cmU=" * 4
        yield _delta(index, {"type": "signature_delta", "signature": signature})
        yield {"type": "content_block_stop", "index": index}
        index += 1
    if reply.text:
        yield {
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "text", "text": ""},
        }
        for piece in _chunks(reply.text):
            yield _delta(index, {"type": "text_delta", "text": piece})
        yield {"type": "content_block_stop", "index": index}
        index += 1
    for call in reply.calls:
        block = {"type": "tool_use", "id": _new_id("toolu_01"), "name": tool_name, "input": {}}
        yield {"type": "content_block_start", "index": index, "content_block": block}
        yield _delta(index, {"type": "input_json_delta", "partial_json": ""})
        for piece in _chunks(json.dumps(_shell_arguments(tool_name, call)), 9):
            yield _delta(index, {"type": "input_json_delta", "partial_json": piece})
        yield {"type": "content_block_stop", "index": index}
        index += 1
    stop = "tool_use" if reply.calls else "end_turn"
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": _usage("anthropic", reply.input_tokens),
    }
    yield {"type": "message_stop"}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _responses_events(reply: Reply, model: str, tool_name: str) -> Iterator[dict[str, Any]]:
    response: dict[str, Any] = {
        "id": _new_id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": model,
        "output": [],
        "usage": None,
    }
    yield {"type": "response.created", "response": response}
    yield {"type": "response.in_progress", "response": response}
    output: list[dict[str, Any]] = []
    if reply.thinking:
        item: dict[str, Any] = {"id": _new_id("rs_"), "type": "reasoning", "summary": []}
        position = len(output)
        yield {"type": "response.output_item.added", "output_index": position, "item": item}
        part = {"type": "summary_text", "text": ""}
        yield {
            "type": "response.reasoning_summary_part.added",
            "item_id": item["id"],
            "output_index": position,
            "summary_index": 0,
            "part": part,
        }
        for piece in _chunks(reply.thinking, 16):
            yield {
                "type": "response.reasoning_summary_text.delta",
                "item_id": item["id"],
                "output_index": position,
                "summary_index": 0,
                "delta": piece,
            }
        done = {
            **item,
            "summary": [{"type": "summary_text", "text": reply.thinking}],
            "encrypted_content": "gAAAAAfake" + uuid.uuid4().hex,
        }
        yield {"type": "response.output_item.done", "output_index": position, "item": done}
        output.append(done)
    if reply.text:
        position = len(output)
        message: dict[str, Any] = {
            "id": _new_id("msg_"),
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        yield {"type": "response.output_item.added", "output_index": position, "item": message}
        for piece in _chunks(reply.text):
            yield {
                "type": "response.output_text.delta",
                "item_id": message["id"],
                "output_index": position,
                "content_index": 0,
                "delta": piece,
            }
        content = [{"type": "output_text", "text": reply.text, "annotations": []}]
        done = {**message, "status": "completed", "content": content}
        yield {"type": "response.output_item.done", "output_index": position, "item": done}
        output.append(done)
    for call in reply.calls:
        position = len(output)
        arguments = json.dumps(_shell_arguments(tool_name, call))
        item = {
            "id": _new_id("fc_"),
            "type": "function_call",
            "call_id": _new_id("call_"),
            "name": tool_name,
            "arguments": "",
            "status": "in_progress",
        }
        yield {"type": "response.output_item.added", "output_index": position, "item": item}
        for piece in _chunks(arguments, 8):
            yield {
                "type": "response.function_call_arguments.delta",
                "item_id": item["id"],
                "output_index": position,
                "delta": piece,
            }
        done = {**item, "arguments": arguments, "status": "completed"}
        yield {"type": "response.output_item.done", "output_index": position, "item": done}
        output.append(done)
    completed = {
        **response,
        "status": "completed",
        "output": output,
        "usage": _usage("responses", reply.input_tokens),
    }
    yield {"type": "response.completed", "response": completed}


def _chat_events(reply: Reply, model: str, tool_name: str) -> Iterator[dict[str, Any]]:
    base = {
        "id": _new_id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    if reply.thinking:
        for piece in _chunks(reply.thinking, 16):
            yield chunk({"reasoning_content": piece})
    for piece in _chunks(reply.text) if reply.text else []:
        yield chunk({"content": piece})
    for position, call in enumerate(reply.calls):
        arguments = json.dumps(_shell_arguments(tool_name, call))
        first = {
            "index": position,
            "id": _new_id("call_"),
            "type": "function",
            "function": {"name": tool_name, "arguments": ""},
        }
        yield chunk({"tool_calls": [first]})
        for piece in _chunks(arguments, 8):
            yield chunk({"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.calls else "stop")
    yield {**base, "choices": [], "usage": _usage("chat", reply.input_tokens)}


def anthropic_blocks(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The content blocks a streamed Anthropic message's events add up to (text, thinking
    and its signature, tool input from its JSON fragments)."""
    content: list[dict[str, Any]] = []
    arguments: dict[int, str] = {}
    for event in events:
        if event["type"] == "content_block_start":
            content.append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            block, delta = content[event["index"]], event["delta"]
            if delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "input_json_delta":
                arguments[event["index"]] = (
                    arguments.get(event["index"], "") + delta["partial_json"]
                )
    for index, text in arguments.items():
        content[index]["input"] = json.loads(text or "{}")
    return content


def _whole_response(api: str, reply: Reply, model: str, tool_name: str) -> dict[str, Any]:
    """The non-streamed body: the last state of the streamed one."""
    events = list(_sse_events(api, reply, model, tool_name))
    if api == "responses":
        completed: dict[str, Any] = events[-1]["response"]
        return completed
    if api == "anthropic":
        message: dict[str, Any] = dict(events[0]["message"])
        content = anthropic_blocks(events)
        message.update(content=content, stop_reason=events[-2]["delta"]["stop_reason"])
        message["usage"] = _usage("anthropic", reply.input_tokens)
        return message
    text = reply.text or None
    calls = [
        {
            "id": _new_id("call_"),
            "type": "function",
            "function": {
                "name": tool_name,
                "arguments": json.dumps(_shell_arguments(tool_name, c)),
            },
        }
        for c in reply.calls
    ]
    choice_message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        choice_message["tool_calls"] = calls
    return {
        "id": _new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": choice_message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": _usage("chat", reply.input_tokens),
    }


# ---------------------------------------------------------------------- wire


def _send_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.send_header("request-id", f"req_{next(_counter)}")
    handler.end_headers()
    handler.wfile.write(data)


def _send_sse(
    handler: BaseHTTPRequestHandler, events: list[dict[str, Any]], *, cut: bool, delay: float
) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Cache-Control", "no-cache")
    handler.end_headers()
    try:
        for sequence_number, event in enumerate(events):
            if "response" in event.get("type", "") or event.get("type", "").startswith("response."):
                event = {**event, "sequence_number": sequence_number}
            name = event.get("type") if "object" not in event else None
            frame = (f"event: {name}\n" if name else "") + f"data: {json.dumps(event)}\n\n"
            data = frame.encode()
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()
            if delay:
                time.sleep(delay)
        if cut:
            handler.close_connection = True
            handler.connection.shutdown(2)
            return
        if events and "object" in events[0]:
            done = b"data: [DONE]\n\n"
            handler.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n")
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


# ---------------------------------------------------------------------- the demo model


_BACKTICKED = re.compile(r"`([^`]+)`")


def demo_responder(api: str, body: dict[str, Any]) -> Step:
    """The built-in offline model of ``universal-event run`` (no ``--model-url``).

    * a prompt with a command in backticks (``Use the shell to run `echo 1+1 | bc` ``)
      → the model asks to run that command (Claude Code: ``Bash``; Codex: ``exec_command``);
    * a request that ends with a tool result → the model reports the command's output;
    * any other prompt → the model says what history it was given (prompts, tool
      calls, the last tool output): after a hand-off this shows, at the model, that the
      other runtime's history arrived.
    """
    history = _history(api, body)
    last_kind, last_text = history[-1] if history else ("user", "")
    if last_kind == "result":
        return Reply(text=f"The command printed: {last_text.strip()!r}.")
    command = _BACKTICKED.search(last_text)
    if command is not None:
        return Reply(
            thinking=f"The user wants the output of `{command.group(1)}`; run it.",
            text=f"Running `{command.group(1)}`.",
            calls=[ShellCall(command.group(1), "Run the command the user asked for")],
        )
    prompts = sum(kind == "user" for kind, _ in history[:-1])
    calls = [text for kind, text in history if kind == "call"]
    results = [text for kind, text in history if kind == "result"]
    seen = f"{prompts} earlier prompt{'s' * (prompts != 1)}, tool calls {calls or 'none'}"
    if results:
        seen += f", last output {results[-1].strip()!r}"
    return Reply(text=f"{_API_NAMES.get(api, api)}: I was given {seen}.")


_API_NAMES = {"anthropic": "Messages API", "responses": "Responses API", "chat": "Chat API"}


def _history(api: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) per user prompt, tool call and tool result of a request, in order.

    Text the runtimes add themselves is skipped: Claude Code's ``<system-reminder>``
    blocks, Codex's developer messages and ``<environment_context>``.
    """
    out: list[tuple[str, str]] = []
    if api == "responses":
        for item in body.get("input") or []:
            kind = item.get("type", "message")
            if kind == "message" and item.get("role") == "user":
                text = _texts(item.get("content"))
                if text and not text.lstrip().startswith("<"):
                    out.append(("user", text))
            elif kind in ("function_call", "custom_tool_call"):
                out.append(("call", str(item.get("name"))))
            elif kind in ("function_call_output", "custom_tool_call_output"):
                output = item.get("output")
                text = output if isinstance(output, str) else _texts(output)
                # Codex prefixes the command's output with a header ending in "Output:\n".
                out.append(("result", text.split("Output:\n", 1)[-1]))
        return out
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for block in blocks or []:
            kind = block.get("type")
            if message.get("role") == "user" and kind == "text":
                text = str(block.get("text") or "")
                if text and not text.lstrip().startswith("<system-reminder>"):
                    out.append(("user", text))
            elif kind == "tool_use":
                out.append(("call", str(block.get("name"))))
            elif kind == "tool_result":
                text = _texts(block.get("content"))
                out.append(("result", text.split("<system-reminder>", 1)[0]))
    return out


def _texts(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
