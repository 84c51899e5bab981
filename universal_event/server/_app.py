"""The control plane: a Starlette app between agents (producers) and clients.

Routes::

    POST /sessions/{id}/events           push events (native with ?from=RUNTIME, or universal)
    GET  /sessions/{id}/events           SSE; resume with Last-Event-ID or ?after=SEQ;
                                         live tail unless ?follow=0
    GET  /sessions/{id}/messages         the derived neutral messages
    GET  /sessions/{id}/render?to=T      the SDK create() kwargs for target T
    GET  /sessions                       sessions the token may read
    GET  /view/{id}                      the session viewer (HTML + EventSource)
    GET  /healthz

Errors are JSON: ``{"error": {"code": "...", "message": "..."}}`` with a 4xx/5xx status,
and a refused write appends nothing.

Auth (unless the app runs without tokens, ``--dev``): ``Authorization: Bearer TOKEN``;
for GET requests also ``?token=TOKEN``, because a browser's EventSource cannot set
headers. Writing needs ``write`` on the session, everything else ``read``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from importlib import resources
from typing import Any

import anyio.to_thread
import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from universal_event.errors import DecodeError, RenderError, SessionNotFoundError, SurfaceError
from universal_event.events import EVENT_TYPES
from universal_event.server._auth import Right, Tokens
from universal_event.server._hub import Hub
from universal_event.server._ingest import BadInput, Limits, parse_body
from universal_event.server._stream import EventStream
from universal_event.server._writer import IdempotencyKeyReused, SessionWriters
from universal_event.sse import resume_after
from universal_event.stores import Store

__all__ = ["create_app"]

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$")
_RENDER_MODULES = {
    "anthropic": "adapters.anthropic",
    "openai-chat": "adapters.openai_chat",
    "openai-responses": "adapters.openai_responses",
}
_json = msgspec.json.Encoder()


class _Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return _json.encode(content)


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


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
        if not _SESSION_ID.match(session_id):
            return session_id, _error(
                400,
                "bad_session_id",
                f"session id {session_id[:80]!r} must match {_SESSION_ID.pattern}",
            )
        return session_id, self._refuse(request, session_id, right)

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
                    )
                )
            except IdempotencyKeyReused as exc:
                return _error(422, "idempotency_key_reused", str(exc))
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
            return _error(400, "bad_resume_position", str(exc))
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
        except SessionNotFoundError as exc:
            return _error(404, "session_not_found", str(exc))
        except ImportError as exc:
            return _error(501, "not_available", f"deriving messages is not available: {exc}")
        return _Json(messages)

    async def get_render(self, request: Request) -> Response:
        session_id, refused = self._session(request, "read")
        if refused is not None:
            return refused
        target = request.query_params.get("to", "")
        if target not in _RENDER_MODULES:
            return _error(
                400,
                "unknown_target",
                f"?to={target!r} is not a target; known: {', '.join(_RENDER_MODULES)}",
            )
        try:
            rendered = await anyio.to_thread.run_sync(_render, self.store, session_id, target)
        except SessionNotFoundError as exc:
            return _error(404, "session_not_found", str(exc))
        except RenderError as exc:
            return _error(422, "render_failed", str(exc))
        except ImportError as exc:
            return _error(501, "not_available", f"rendering is not available: {exc}")
        return _Json(rendered)

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
        return _Json({"ok": True, "overflow_disconnects": self.hub.overflow_disconnects})


def _open_log(store: Store, session_id: str) -> Any:
    from universal_event.log import SessionLog

    if store.latest_seq(session_id) < 0:
        raise SessionNotFoundError(session_id)
    return SessionLog.open(store, session_id)


def _derive(store: Store, session_id: str) -> Any:
    return msgspec.to_builtins(_open_log(store, session_id).derive_messages())


def _render(store: Store, session_id: str, target: str) -> Any:
    import importlib

    log = _open_log(store, session_id)
    module = importlib.import_module(_RENDER_MODULES[target])
    return module.render_request(log.derive_messages(), log.current_header())


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

    app = Starlette(
        routes=[
            Route("/sessions/{session_id}/events", plane.post_events, methods=["POST"]),
            Route("/sessions/{session_id}/events", plane.get_events, methods=["GET"]),
            Route("/sessions/{session_id}/messages", plane.get_messages, methods=["GET"]),
            Route("/sessions/{session_id}/render", plane.get_render, methods=["GET"]),
            Route("/sessions", plane.list_sessions, methods=["GET"]),
            Route("/view/{session_id}", plane.view, methods=["GET"]),
            Route("/static/viewer.js", plane.viewer_js, methods=["GET"]),
            Route("/healthz", plane.healthz, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.state.control_plane = plane
    return app
