"""OpenAI Responses API: native stream → Universal Events (``_stream``), wire structs
(``_wire``), output items ↔ parts (``_items``), and the request renderer (``_request``)."""

from adapters.openai_responses._request import parse_request, render_request
from adapters.openai_responses._stream import OpenAIResponsesAdapter, atap, tap

__all__ = ["OpenAIResponsesAdapter", "atap", "parse_request", "render_request", "tap"]
