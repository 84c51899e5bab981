"""The control plane: a Starlette app between agents (producers) and clients.

Routes::

    POST /sessions/{id}/events           push events (native with ?from=RUNTIME, or universal)
    GET  /sessions/{id}/events           SSE; resume with Last-Event-ID or ?after=SEQ;
                                         live tail unless ?follow=0
    GET  /sessions/{id}/messages         the derived neutral messages
    GET  /sessions/{id}/render?to=T      the SDK create() kwargs for target T (``&model=M``
                                         overrides the session's model); how many warnings
                                         the rendering gave (what it repaired, dropped or
                                         renamed) in ``Universal-Event-Warning-Count``;
                                         ``&warnings=1``: ``{"request", "warnings"}``
    GET  /sessions                       sessions the token may read
    GET  /view/{id}                      the session viewer (HTML + EventSource)
    GET  /healthz

Errors are JSON: ``{"error": {"code": "...", "message": "..."}}`` with a 4xx/5xx status
(some add fields: ``event_id`` and ``seq`` for an id stored with another body, 409;
``session_id`` and ``seq`` for a corrupt stored event, 500), and a refused write
appends nothing. Unknown routes (404), wrong methods (405), store failures (503 with
``Retry-After``: other writers kept appending first, or the store is unavailable) and
unexpected errors (500) answer in the same format.

Auth (unless the app runs without tokens, ``--dev``): ``Authorization: Bearer TOKEN``;
for GET requests also ``?token=TOKEN``, because a browser's EventSource cannot set
headers. Writing needs ``write`` on the session, everything else ``read``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from importlib import resources
from typing import Any

import anyio.to_thread
import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from universal_event.errors import (
    CorruptEventError,
    DecodeError,
    EventIdConflictError,
    RenderError,
    SessionNotFoundError,
    StoreError,
    SurfaceError,
)
from universal_event.events import EVENT_TYPES
from universal_event.server._auth import Right, Tokens
from universal_event.server._hub import Hub
from universal_event.server._ingest import BadInput, Limits, parse_body
from universal_event.server._stream import EventStream
from universal_event.server._writer import IdempotencyKeyReused, SessionWriters, WriteContention
from universal_event.sse import resume_after
from universal_event.stores import Store

__all__ = ["create_app"]

logger = logging.getLogger("universal_event.server")

_SESSION_ID = re.compile(r"[^/\x00-\x1f\x7f]{1,512}")
"""The ids the routes serve: any a store holds (spaces, any script), but for a ``/`` (a
path parameter stops there) and control characters, up to 512 characters."""
_json = msgspec.json.Encoder()
_WARNING_COUNT = "Universal-Event-Warning-Count"


class _Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _json.encode(content)


def _error(
    status: int,
    code: str,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    **details: Any,
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message, **details}},
        status_code=status,
        headers=headers,
    )


_RETRY_AFTER = {"Retry-After": "1"}


def _store_error(exc: StoreError) -> JSONResponse:
    """The reply to a store failure (the store is the source of truth: nothing is done)."""
    if isinstance(exc, SessionNotFoundError):
        return _error(404, "session_not_found", str(exc))
    if isinstance(exc, CorruptEventError):
        logger.error("%s", exc)
        return _error(500, "corrupt_event", str(exc), session_id=exc.session_id, seq=exc.seq)
    if isinstance(exc, WriteContention):
        return _error(503, "write_contention", str(exc), headers=_RETRY_AFTER)
    logger.error("store error: %s", exc, exc_info=exc)
    return _error(503, "store_unavailable", f"the store failed: {exc}", headers=_RETRY_AFTER)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    codes = {404: "not_found", 405: "method_not_allowed"}
    code = codes.get(exc.status_code, "http_error")
    message = exc.detail
    if exc.status_code == 404:
        message = f"no route for {request.method} {request.url.path[:200]}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path[:200]}"
    return _error(exc.status_code, code, message, headers=exc.headers)


async def _on_store_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StoreError)
    return _store_error(exc)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    return _error(500, "internal_error", f"{type(exc).__name__} (see the server's log)")


class _ControlPlane:
    """The route handlers and the state they share."""

    def __init__(
        self,
        store: Store,
        tokens: Tokens | None,
        limits: Limits,
        keepalive: float,
        tail_timeout: float,
    ) -> None:
        self.store = store
        self.tokens = tokens
        self.limits = limits
        self.keepalive = keepalive
        self.hub = Hub(
            store,
            client_buffer=limits.client_buffer_events,
            client_buffer_bytes=limits.client_buffer_bytes,
            send_timeout=limits.send_timeout,
            tail_timeout=tail_timeout,
            keepalive=keepalive,
        )
        self.writers = SessionWriters(store)
        self.session_locks: dict[str, asyncio.Lock] = {}

    # ------------------------------------------------------------ auth

    def _token(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        if request.method == "GET":
            return request.query_params.get("token") or None
        return None

    def _refuse(self, request: Request, session_id: str | None, right: Right) -> Response | None:
        """None when the request may go on; else the 401/403 response."""
        if self.tokens is None:
            return None
        token = self._token(request)
        if token is None:
            return _error(401, "unauthenticated", "a bearer token is required")
        if not self.tokens.known(token):
            return _error(401, "unauthenticated", "unknown token")
        if session_id is not None and not self.tokens.allows(token, session_id, right):
            return _error(403, "forbidden", f"this token may not {right} session {session_id!r}")
        return None

    def _session(self, request: Request, right: Right) -> tuple[str, Response | None]:
        session_id: str = request.path_params["session_id"]
        if not _SESSION_ID.fullmatch(session_id):
            return session_id, _error(
                400,
                "bad_session_id",
                f"session id {session_id[:80]!r} must be 1 to 512 characters, no '/' and "
                "no control character",
            )
        return session_id, self._refuse(request, session_id, right)

    async def events(self, request: Request) -> Response:
        if request.method == "POST":
            return await self.post_events(request)
        return await self.get_events(request)

    # ------------------------------------------------------------ write

    async def post_events(self, request: Request) -> Response:
        session_id, refused = self._session(request, "write")
        if refused is not None:
            return refused
        try:
            body = await self._read_body(request)
            parsed = parse_body(
                body,
                session_id=session_id,
                runtime=request.query_params.get("from"),
                content_type=request.headers.get("content-type", ""),
                idempotency_key=request.headers.get("idempotency-key"),
                limits=self.limits,
            )
        except BadInput as exc:
            return _error(exc.status, exc.code, exc.message)
        lock = self.session_locks.setdefault(session_id, asyncio.Lock())
        async with lock:
            try:
                result = await anyio.to_thread.run_sync(
                    partial(
                        self.writers.append,
                        session_id,
                        parsed.events,
                        idempotency_key=parsed.idempotency_key,
                        # Ids derived from a native stream: its adapter may stamp
                        # details anew, so a retry is known by its id alone.
                        check_bodies=request.query_params.get("from") is None,
                    )
                )
            except IdempotencyKeyReused as exc:
                return _error(422, "idempotency_key_reused", str(exc))
            except EventIdConflictError as exc:
                return _error(
                    409, "event_id_conflict", str(exc), event_id=exc.event_id, seq=exc.seq
                )
            except SurfaceError as exc:
                return _error(422, "bad_surface_intent", str(exc))
            self.hub.published_locally(session_id, result.appended)
        body_out: dict[str, Any] = {
            "appended": len(result.appended),
            "duplicates": result.duplicates,
        }
        if result.appended:
            body_out["first_seq"] = result.appended[0].seq
            body_out["last_seq"] = result.appended[-1].seq
        return _Json(body_out)

    async def _read_body(self, request: Request) -> bytes:
        limit = self.limits.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise BadInput(413, "body_too_large", f"body of {declared} bytes; the limit is {limit}")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadInput(413, "body_too_large", f"body over the limit of {limit} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    # ------------------------------------------------------------ read

    async def get_events(self, request: Request) -> Response:
        session_id, refused = self._session(request, "read")
        if refused is not None:
            return refused
        try:
            after = resume_after(
                request.headers.get("last-event-id"), request.query_params.get("after")
            )
        except DecodeError as exc:
            return _error(400, "bad_resume_position", exc.problem)
        follow = request.query_params.get("follow", "1") not in ("0", "false", "no")
        return EventStream(
            hub=self.hub,
            session_id=session_id,
            after=after,
            follow=follow,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def get_messages(self, request: Request) -> Response:
        session_id, refused = self._session(request, "read")
        if refused is not None:
            return refused
        try:
            messages = await anyio.to_thread.run_sync(_derive, self.store, session_id)
        except ImportError as exc:
            return _error(501, "not_available", f"deriving messages is not available: {exc}")
        return _Json(messages)

    async def get_render(self, request: Request) -> Response:
        session_id, refused = self._session(request, "read")
        if refused is not None:
            return refused
        target = request.query_params.get("to", "")
        targets = _render_targets()
        if target not in targets:
            return _error(
                400,
                "unknown_target",
                f"?to={target!r} is not a target; known: {', '.join(targets)}",
            )
        model = request.query_params.get("model") or None
        try:
            rendered, warnings = await anyio.to_thread.run_sync(
                _render, self.store, session_id, target, model
            )
        except RenderError as exc:
            return _error(422, "render_failed", str(exc))
        except ImportError as exc:
            return _error(501, "not_available", f"rendering is not available: {exc}")
        count = {_WARNING_COUNT: str(len(warnings))}
        if request.query_params.get("warnings") in ("1", "true"):
            return _Json({"request": rendered, "warnings": warnings}, headers=count)
        return _Json(rendered, headers=count)

    async def list_sessions(self, request: Request) -> Response:
        refused = self._refuse(request, None, "read")
        if refused is not None:
            return refused
        sessions = await anyio.to_thread.run_sync(self.store.list_sessions)
        if self.tokens is not None:
            token = self._token(request)
            assert token is not None
            readable = self.tokens.readable_sessions(token)
            if readable is not None:
                sessions = [info for info in sessions if info.session_id in readable]
        return _Json(sessions)

    async def view(self, request: Request) -> Response:
        session_id, refused = self._session(request, "read")
        if refused is not None:
            return refused
        return Response(_viewer_html(), media_type="text/html; charset=utf-8")

    async def viewer_js(self, request: Request) -> Response:
        return Response(_static("viewer.js"), media_type="text/javascript; charset=utf-8")

    async def healthz(self, request: Request) -> Response:
        hub = self.hub
        return _Json(
            {
                "ok": True,
                "overflow_disconnects": hub.overflow_disconnects,
                "send_timeouts": hub.send_timeouts,
                "feed_failures": hub.feed_failures,
                "open_streams": len(hub.streams),
            }
        )


def _stored_session(store: Store, session_id: str) -> Any:
    """What the model sees of the session, its events not kept (a log would hold them
    all: 680 MB a request for a million)."""
    from universal_event.log import StoredSession

    return StoredSession(store, session_id)


def _derive(store: Store, session_id: str) -> Any:
    return msgspec.to_builtins(_stored_session(store, session_id).derive_messages())


def _render_targets() -> tuple[str, ...]:
    from adapters import TARGETS

    return tuple(TARGETS)


def _render(store: Store, session_id: str, target: str, model: str | None) -> tuple[Any, list[Any]]:
    """The rendered request, and its warnings as builtins."""
    from adapters import render_session

    warnings: list[Any] = []
    stored = _stored_session(store, session_id)
    rendered = render_session(stored, target, model=model, warnings=warnings)
    return rendered, msgspec.to_builtins(warnings)


def _static(name: str) -> bytes:
    return resources.files("universal_event.server").joinpath("static", name).read_bytes()


def _viewer_html() -> bytes:
    types = msgspec.json.encode(sorted(EVENT_TYPES))
    return _static("viewer.html").replace(b"__EVENT_TYPES__", types)


def create_app(
    store: Store,
    *,
    tokens: Tokens | None,
    limits: Limits | None = None,
    keepalive: float = 15.0,
    tail_timeout: float = 1.0,
) -> Starlette:
    """The control-plane app over ``store``; ``tokens=None`` disables auth (dev only).

    The caller owns ``store`` (and closes it). ``keepalive`` is the idle interval of SSE
    comment frames; ``tail_timeout`` how long one store tail waits before re-checking
    whether anyone still listens.
    """
    plane = _ControlPlane(store, tokens, limits or Limits(), keepalive, tail_timeout)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await plane.hub.stop()

    # Starlette's own 404/405 and 500 replies are plain text; these keep the format.
    exception_handlers: dict[Any, Any] = {
        HTTPException: _on_http_exception,
        StoreError: _on_store_error,
        Exception: _on_unexpected,
    }

    app = Starlette(
        routes=[
            # One route for both methods, so a 405 names both in its ``Allow``.
            Route("/sessions/{session_id}/events", plane.events, methods=["GET", "POST"]),
            Route("/sessions/{session_id}/messages", plane.get_messages, methods=["GET"]),
            Route("/sessions/{session_id}/render", plane.get_render, methods=["GET"]),
            Route("/sessions", plane.list_sessions, methods=["GET"]),
            Route("/view/{session_id}", plane.view, methods=["GET"]),
            Route("/static/viewer.js", plane.viewer_js, methods=["GET"]),
            Route("/healthz", plane.healthz, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers=exception_handlers,
    )
    app.state.control_plane = plane
    return app
