""":class:`CodexAdapter`: one normaliser for both live Codex dialects, detected per line.

A line with a ``type`` field and no ``method`` is ``codex exec --json``; a line with a
``method`` is an app-server notification (``params`` on the wire, ``payload`` in the
capture harness's files). JSON-RPC responses (``id`` + ``result``/``error``) that appear
in a raw app-server wire log are kept as ``native/unknown``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from adapters.codex._app_server import AppServerLines
from adapters.codex._core import LateItem
from adapters.codex._exec import ExecLines
from universal_event.errors import AdapterError
from universal_event.events import Event

__all__ = ["CodexAdapter", "notification_to_line"]


class CodexAdapter(ExecLines, AppServerLines):
    """``codex exec --json`` lines and app-server v2 notifications → Universal Events.

    ``feed`` takes raw JSON-lines ``bytes`` (cut anywhere; buffered), a ``str`` line, a
    ``dict``, or the ``openai_codex`` SDK's ``Notification`` (or a bare pydantic
    notification payload). ``close()`` ends a stream that stopped without its terminal
    event (SIGINT: exec just stops after ``turn.started``): the open turn ends
    ``interrupted`` and what the message had gathered is kept as ``partial``.

    ``model``: the model name for provenance. ``codex exec --json`` never prints it; the
    app-server stream sets it from ``thread/started``.

    A ``request/header`` (provider ``openai``, api ``responses``, the model, settings
    ``{"store": False}``: what every Codex request carries) follows the first
    ``turn/start`` once the model is known, and the first one after it changed. Neither
    stream shows the system prompt, the tools or the reasoning settings: the header
    leaves them unknown.
    """

    def feed(self, native: Any) -> list[Event]:
        """Normalise one native item into the events it completes."""
        out: list[Event] = []
        if not self._feed_lines(native, out):
            line = notification_to_line(native)
            if line is None:
                raise AdapterError(
                    f"cannot normalise a {type(native).__name__!r}: expected JSON-lines bytes, "
                    "a str line, a dict or an openai_codex notification",
                    runtime=self.runtime,
                )
            self._line(line, out)
        return out

    def close(self) -> list[Event]:
        """Finish: a last line without newline, then an open turn as interrupted (the
        results its response still held: :meth:`_settle_results`)."""
        out: list[Event] = []
        for raw in self._rest_of_lines():
            self._raw_line(raw, out, "truncated last line (stream cut)")
        # The held results are logged at the input's end only with raw events: without
        # them a capture imported again once grown would log them twice
        # (:meth:`_settle_results`).
        release = self._raw_events
        if self._turn_open:
            self._end_turn(
                out,
                "interrupted",
                "close",
                error="stream ended before the turn did",
                release=release,
            )
        else:
            self._flush(out, "close", status="partial", stop_reason="interrupted")
            self._settle_results(out, release)
        return out

    def _start_turn(self, out: list[Event], turn_id: Any, native_type: str) -> None:
        """``turn/start``, then the ``request/header`` the turn's requests carry when none
        was written yet for the model."""
        super()._start_turn(out, turn_id, native_type)
        self._settings_header(out, native_type)

    def _line(self, line: Mapping[str, Any], out: list[Event]) -> None:
        method = line.get("method")
        try:
            if isinstance(method, str):
                params = line.get("params")
                if params is None:
                    params = line.get("payload")
                self._app_line(method, params if isinstance(params, Mapping) else {}, out)
            elif isinstance(line.get("type"), str):
                self._exec_line(line, out)
            elif "id" in line and ("result" in line or "error" in line):
                out.append(self.unknown("response", dict(line), "JSON-RPC response"))
            else:
                out.append(
                    self.unknown(None, dict(line), "neither an exec line nor a notification")
                )
        except LateItem as exc:  # out of order or repeated: kept as it came
            out.append(self.unknown(str(method or line.get("type")), dict(line), str(exc)))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            # A line of an unexpected shape: keep it, and go on with the next one.
            out.append(
                self.unknown(str(method or line.get("type")), dict(line), f"bad line: {exc!r}")
            )


def notification_to_line(native: Any) -> dict[str, Any] | None:
    """An ``openai_codex`` notification as the wire line it came from (None if it is not one).

    ``Notification(method, payload)``: the payload is a pydantic model (dumped by alias,
    i.e. the wire's camelCase) or ``UnknownNotification(params)``. A bare pydantic
    payload is looked up in the SDK's method registry by its class.
    """
    method = getattr(native, "method", None)
    if isinstance(method, str) and hasattr(native, "payload"):
        return {"method": method, "params": _params(native.payload)}
    dump = getattr(native, "model_dump", None)
    if callable(dump):
        method = _method_of(type(native))
        if method is not None:
            return {"method": method, "params": _params(native)}
    return None


def _params(payload: Any) -> dict[str, Any]:
    dump = getattr(payload, "model_dump", None)
    if callable(dump):
        params = dump(mode="json", by_alias=True, exclude_none=True, warnings=False)
        return params if isinstance(params, dict) else {}
    if dataclasses.is_dataclass(payload) and not isinstance(payload, type):
        params = getattr(payload, "params", None)
        return dict(params) if isinstance(params, Mapping) else {}
    return dict(payload) if isinstance(payload, Mapping) else {}


_METHODS: dict[type, str] | None = None


def _method_of(cls: type) -> str | None:
    global _METHODS
    if _METHODS is None:
        try:
            from openai_codex.generated.notification_registry import NOTIFICATION_MODELS
            from openai_codex.models import RawResponseItemCompletedNotification
        except ImportError:  # the SDK is optional: without it there are no typed objects
            return None
        _METHODS = {model: method for method, model in NOTIFICATION_MODELS.items()}
        _METHODS[RawResponseItemCompletedNotification] = "rawResponseItem/completed"
    return _METHODS.get(cls)
