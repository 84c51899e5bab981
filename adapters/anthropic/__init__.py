"""Anthropic Messages API: native stream → events (:class:`AnthropicAdapter`).

``_wire`` declares the SSE wire format (msgspec structs, the fast path), ``_stream``
normalises streamed and non-streamed responses.
"""

from __future__ import annotations

from adapters.anthropic._request import parse_request, render_request
from adapters.anthropic._stream import AnthropicAdapter

__all__ = ["AnthropicAdapter", "parse_request", "render_request"]
