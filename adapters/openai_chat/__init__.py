"""OpenAI Chat Completions, both directions.

Native → events: :class:`OpenAIChatAdapter` (streamed chunks, whole completions, error
bodies) and :func:`tap` / :func:`atap` around the ``openai`` client's streams.
"""

from adapters.openai_chat._request import parse_request, render_request
from adapters.openai_chat._stream import OpenAIChatAdapter, atap, tap

__all__ = ["OpenAIChatAdapter", "atap", "parse_request", "render_request", "tap"]
