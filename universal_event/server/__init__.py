"""The control plane: SSE transport, idempotent writes, auth, and the session viewer.

``create_app(store, tokens=...)`` builds the Starlette app; ``universal-event serve``
runs it under uvicorn. See :mod:`universal_event.server._app` for the routes.
"""

from universal_event.server._app import create_app
from universal_event.server._auth import Grant, Tokens
from universal_event.server._ingest import Limits

__all__ = ["Grant", "Limits", "Tokens", "create_app"]
