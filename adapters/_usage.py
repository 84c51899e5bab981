"""Usage normalisers: every provider's token counts into one :class:`Usage`, once.

The rule (DESIGN.md, PITFALLS.md #12): ``Usage.input_tokens`` always *includes* cached
tokens. Anthropic reports ``input_tokens`` *excluding* cache reads and cache writes
(``cache_read_input_tokens``, ``cache_creation_input_tokens``), so its total is the sum
of the three; OpenAI's ``prompt_tokens`` / ``input_tokens`` already include
``cached_tokens``. The provider's own object is kept in ``native``.

Shared here so every adapter (Messages API, Claude Code, Chat, Responses, Codex) applies
the same arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from universal_event.events import Usage

__all__ = ["anthropic_usage", "merge_anthropic_usage", "openai_usage"]


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def anthropic_usage(native: Mapping[str, Any]) -> Usage:
    """Normalise an Anthropic ``usage`` object (message, ``message_delta`` or Claude Code).

    ``input_tokens`` excludes the cache on the wire; the cache figures are added here.
    ``output_tokens_details.thinking_tokens`` (newer API versions) becomes
    ``reasoning_tokens``.
    """
    cache_read = _int(native.get("cache_read_input_tokens"))
    cache_write = _int(native.get("cache_creation_input_tokens"))
    details = native.get("output_tokens_details")
    reasoning = _int(details.get("thinking_tokens")) if isinstance(details, Mapping) else 0
    return Usage(
        input_tokens=_int(native.get("input_tokens")) + cache_read + cache_write,
        cache_read_tokens=cache_read,
        cache_write_tokens=cache_write,
        output_tokens=_int(native.get("output_tokens")),
        reasoning_tokens=reasoning,
        native=dict(native),
    )


def merge_anthropic_usage(
    start: Mapping[str, Any] | None, delta: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The usage of a streamed message: ``message_start`` usage updated by ``message_delta``.

    ``message_start`` carries the input and cache figures and a provisional
    ``output_tokens`` (already 1..88 in real recordings); ``message_delta`` carries the
    final, cumulative ``output_tokens`` and, in newer API versions, repeats the input and
    cache figures. Older recordings (claude-3-5, 2024) send only ``output_tokens`` there,
    so a ``null``/missing key in the delta never overwrites the start value.
    """
    merged: dict[str, Any] = dict(start or {})
    for key, value in (delta or {}).items():
        if value is not None:
            merged[key] = value
    return merged


def openai_usage(native: Mapping[str, Any]) -> Usage:
    """Normalise an OpenAI Chat (``prompt_tokens``) or Responses (``input_tokens``) usage.

    Both already include cached tokens in the input figure.
    """
    input_details = native.get("prompt_tokens_details") or native.get("input_tokens_details")
    output_details = native.get("completion_tokens_details") or native.get("output_tokens_details")
    input_tokens = native.get("prompt_tokens", native.get("input_tokens"))
    output_tokens = native.get("completion_tokens", native.get("output_tokens"))
    return Usage(
        input_tokens=_int(input_tokens),
        cache_read_tokens=_int(input_details.get("cached_tokens"))
        if isinstance(input_details, Mapping)
        else 0,
        output_tokens=_int(output_tokens),
        reasoning_tokens=_int(output_details.get("reasoning_tokens"))
        if isinstance(output_details, Mapping)
        else 0,
        native=dict(native),
    )
