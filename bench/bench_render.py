"""Benchmark: rendering a long history into each provider's request format.

A 500-turn history (each turn: one tool call and a 20 KB tool result) is rendered for
Anthropic Messages, OpenAI Chat and OpenAI Responses and compared, in the same process
and alternating rounds, with

* pydantic-ai's message mapping for the same provider (``AnthropicModel._map_message``,
  ``OpenAIChatModel._map_messages``, ``OpenAIResponsesModel._map_messages``), target
  >= 3x faster;
* litellm's Anthropic ``AnthropicConfig.transform_request`` (OpenAI-format messages in,
  Anthropic body out), target >= 10x faster;
* our own full render, for a re-render after one appended turn with a
  :class:`~adapters._render.RenderCache` (target <= 5% of the full render).

Fairness: both sides get the same history (same turns, ids, arguments and 20 KB
results, in each library's own message types, built before timing), every timed call
runs in the same process, in alternating rounds, and the rounds are timed the way
``timeit`` times its loop: a ``gc.collect()`` before each round, the cyclic GC paused
during it. Without that, a full collection of the heap that pydantic-ai and litellm
bring along lands on whichever call happens to run then (tens of ms on this shared
machine) and the medians measure the collector, not the mappers. The figures are
medians over ``ROUNDS``.

Run: ``.venv/bin/python bench/bench_render.py`` (needs the ``bench`` extra).
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network at import
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adapters import anthropic as anthropic_format
from adapters import openai_chat as chat_format
from adapters import openai_responses as responses_format
from adapters._render import RenderCache, RenderPolicy
from universal_event.events import RequestHeaderEvent
from universal_event.messages import (
    AssistantMessage,
    Message,
    ToolMessage,
    UserMessage,
)
from universal_event.parts import Provenance, TextPart, ToolCallPart

TURNS = 500
RESULT = ("0123456789abcdef" * 1280)[: 20 * 1024]
ROUNDS = 15
MODELS = {"anthropic": "claude-sonnet-4-5", "openai-chat": "gpt-4o", "openai-responses": "gpt-5"}
RENDERERS: dict[str, Any] = {
    "anthropic": anthropic_format.render_request,
    "openai-chat": chat_format.render_request,
    "openai-responses": responses_format.render_request,
}
HEADERS = {
    "anthropic": RequestHeaderEvent(
        provider="anthropic", api="messages", model=MODELS["anthropic"]
    ),
    "openai-chat": RequestHeaderEvent(provider="openai", api="chat", model=MODELS["openai-chat"]),
    "openai-responses": RequestHeaderEvent(
        provider="openai", api="responses", model=MODELS["openai-responses"]
    ),
}


def turn(index: int, seq: int) -> list[Message]:
    call_id = f"call_{index:06d}"
    return [
        AssistantMessage(
            seq=seq,
            content=[
                ToolCallPart(id=call_id, name="read_file", arguments={"path": f"f{index}.txt"})
            ],
            provenance=Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-5"),
        ),
        ToolMessage(
            seq=seq + 1, call_id=call_id, name="read_file", content=[TextPart(text=RESULT)]
        ),
    ]


def our_history(turns: int) -> list[Message]:
    messages: list[Message] = [UserMessage(seq=0, content=[TextPart(text="Read all files.")])]
    for index in range(turns):
        messages.extend(turn(index, 1 + 2 * index))
    return messages


def pydantic_ai_history(turns: int) -> list[Any]:
    from pydantic_ai import messages as m

    history: list[Any] = [m.ModelRequest(parts=[m.UserPromptPart(content="Read all files.")])]
    for index in range(turns):
        call_id = f"call_{index:06d}"
        history.append(
            m.ModelResponse(
                parts=[
                    m.ToolCallPart(
                        tool_name="read_file", args={"path": f"f{index}.txt"}, tool_call_id=call_id
                    )
                ]
            )
        )
        history.append(
            m.ModelRequest(
                parts=[
                    m.ToolReturnPart(tool_name="read_file", content=RESULT, tool_call_id=call_id)
                ]
            )
        )
    return history


def openai_format_history(turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read all files."}]
    for index in range(turns):
        call_id = f"call_{index:06d}"
        history.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "read_file",
                            "arguments": f'{{"path": "f{index}.txt"}}',
                        },
                    }
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": call_id, "content": RESULT})
    return history


def pydantic_ai_mappers() -> dict[str, Callable[[], Any]]:
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.providers.openai import OpenAIProvider

    history = pydantic_ai_history(TURNS)
    params = ModelRequestParameters()
    anthropic = AnthropicModel(MODELS["anthropic"], provider=AnthropicProvider(api_key="x"))
    chat = OpenAIChatModel(MODELS["openai-chat"], provider=OpenAIProvider(api_key="x"))
    responses = OpenAIResponsesModel(
        MODELS["openai-responses"], provider=OpenAIProvider(api_key="x")
    )
    loop = asyncio.new_event_loop()
    return {
        "anthropic": lambda: loop.run_until_complete(anthropic._map_message(history, params, {})),
        "openai-chat": lambda: loop.run_until_complete(chat._map_messages(history, params)),
        "openai-responses": lambda: loop.run_until_complete(
            responses._map_messages(history, {}, params)
        ),
    }


def litellm_transform() -> Callable[[], Any]:
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    config = AnthropicConfig()
    history = openai_format_history(TURNS)
    return lambda: config.transform_request(
        model=MODELS["anthropic"],
        messages=history,
        optional_params={"max_tokens": 4096},
        litellm_params={},
        headers={},
    )


def timed(function: Callable[[], Any]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def measure_ours(
    render: Any,
    header: RequestHeaderEvent,
    history: list[Message],
    appended: list[Message],
    policy: RenderPolicy,
) -> tuple[float, float]:
    """(full render, re-render after one appended turn with a primed cache)."""
    once = timed(lambda: render(history, header, policy))
    cache = RenderCache()
    render(history, header, policy, cache=cache)
    return once, timed(lambda: render(appended, header, policy, cache=cache))


def report(
    name: str, project: float, baseline: float, op: str, target: float, unit: str = "ms"
) -> None:
    if op == ">=":
        ratio = baseline / project
        ok = ratio >= target
    else:
        ratio = project / baseline
        ok = ratio <= target
    print(
        f"RATIO {name} project={project * 1000:.3f}{unit} baseline={baseline * 1000:.3f}{unit} "
        f"ratio={ratio:.3f} target={op}{target} ok={'yes' if ok else 'no'}"
    )


def main() -> None:
    history = our_history(TURNS)
    appended = [*history, *turn(TURNS, 1 + 2 * TURNS)]
    policy = RenderPolicy()
    full: dict[str, list[float]] = {target: [] for target in RENDERERS}
    incremental: dict[str, list[float]] = {target: [] for target in RENDERERS}
    peers: dict[str, list[float]] = {target: [] for target in RENDERERS}
    litellm_times: list[float] = []
    try:
        mappers: dict[str, Callable[[], Any]] | None = pydantic_ai_mappers()
    except ImportError as exc:
        print(f"pydantic-ai not installed ({exc}); install the bench extra", file=sys.stderr)
        mappers = None
    try:
        litellm_call: Callable[[], Any] | None = litellm_transform()
    except ImportError as exc:
        print(f"litellm not installed ({exc}); install the bench extra", file=sys.stderr)
        litellm_call = None
    for round_index in range(ROUNDS):
        gc.collect()
        gc.disable()  # re-enabled after the round (as timeit does for its loop)
        for target, render in RENDERERS.items():
            steps = ["ours"]
            if mappers is not None:
                steps.append("pydantic-ai")
            if target == "anthropic" and litellm_call is not None:
                steps.append("litellm")
            # who runs first alternates by round: neither side always meets cold caches
            for step in steps if round_index % 2 == 0 else steps[::-1]:
                if step == "ours":
                    once, again = measure_ours(render, HEADERS[target], history, appended, policy)
                    full[target].append(once)
                    incremental[target].append(again)
                elif step == "pydantic-ai" and mappers is not None:
                    peers[target].append(timed(mappers[target]))
                elif litellm_call is not None:
                    litellm_times.append(timed(litellm_call))
        gc.enable()
    for target in RENDERERS:
        ours = statistics.median(full[target])
        if mappers is not None:
            report(
                f"render_{target}_vs_pydantic_ai", ours, statistics.median(peers[target]), ">=", 3
            )
        report(
            f"rerender_{target}_after_append_vs_full",
            statistics.median(incremental[target]),
            ours,
            "<=",
            0.05,
        )
    if litellm_call is not None:
        report(
            "render_anthropic_vs_litellm_transform_request",
            statistics.median(full["anthropic"]),
            statistics.median(litellm_times),
            ">=",
            10,
        )


if __name__ == "__main__":
    main()
