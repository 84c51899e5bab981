"""Regression tests for the shared render rules of :mod:`adapters._render` that an audit
found broken (each fails without its fix).

Every rendered request is validated against the SDK's own parameter types, so a repair
that produces something the API would reject still fails.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from adapters._render import RenderCache, RenderPolicy, map_tool_name, same_origin
from tests.adapters._render_support import flatten, log_of, validate_history, validate_request
from tests.adapters.test_render_oracle import TARGETS, module
from universal_event.errors import RenderError
from universal_event.events import RequestHeaderEvent, ToolSpec, WarningEvent
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import (
    Provenance,
    ServerToolCallPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

CLAUDE = Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-5")
GPT = Provenance(provider="openai", api="responses", model="gpt-5")
HEADERS = {
    "anthropic": RequestHeaderEvent(provider="anthropic", api="messages", model=CLAUDE.model),
    "openai-chat": RequestHeaderEvent(provider="openai", api="chat", model="gpt-4o"),
    "openai-responses": RequestHeaderEvent(provider="openai", api="responses", model="gpt-5"),
}
OPENAI_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def render(
    target: str,
    messages: list[Message],
    header: RequestHeaderEvent | None = None,
    policy: RenderPolicy | None = None,
    cache: RenderCache | None = None,
) -> tuple[dict[str, Any], list[WarningEvent]]:
    warnings: list[WarningEvent] = []
    kwargs: dict[str, Any] = module(target).render_request(
        messages,
        header or HEADERS[target],
        policy or RenderPolicy(),
        warnings=warnings,
        cache=cache,
    )
    validate_history(target, kwargs)
    validate_request(target, kwargs)
    return kwargs, warnings


def history(kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = kwargs["messages"] if "messages" in kwargs else kwargs["input"]
    return value


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextPart(text=text)])


def dumped(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def codes(warnings: list[WarningEvent]) -> list[str]:
    return [w.code for w in warnings]


# ---------------------------------------------------------------- unfinished server tools


def _cut_anthropic_search() -> ServerToolCallPart:
    """A ``server_tool_use`` block the stream was cut inside: its input is the JSON text
    streamed so far (recorded: anthropic stream_web_search_citations_thinking, cut)."""
    fragment = '{"query": "San Francisco weather'
    return ServerToolCallPart(
        id="srvtoolu_01FYcUbz",
        name="web_search",
        input=fragment,
        native={
            "type": "server_tool_use",
            "id": "srvtoolu_01FYcUbz",
            "name": "web_search",
            "input": fragment,
        },
        provenance=CLAUDE,
    )


def _search_item(status: str, action: bool) -> ServerToolCallPart:
    native: dict[str, Any] = {"id": "ws_00a6", "type": "web_search_call", "status": status}
    if action:
        native["action"] = {"type": "search", "query": "weather"}
    return ServerToolCallPart(id="ws_00a6", name="web_search", native=native, provenance=GPT)


def test_unfinished_anthropic_server_tool_use_is_not_replayed() -> None:
    messages: list[Message] = [
        user("weather?"),
        AssistantMessage(
            content=[TextPart(text="Let me search."), _cut_anthropic_search()],
            provenance=CLAUDE,
            status="partial",
        ),
        user("continue"),
    ]
    kwargs, warnings = render("anthropic", messages)
    assert "server_tool_use" not in dumped(history(kwargs))
    assert history(kwargs)[1]["content"] == [{"type": "text", "text": "Let me search."}]
    (dropped,) = [w for w in warnings if w.code == "server_tool_dropped"]
    assert "'web_search'" in dropped.message and "srvtoolu_01FYcUbz" in dropped.message


def test_unfinished_responses_server_item_is_not_replayed_nor_its_reasoning() -> None:
    """An ``in_progress`` web_search_call without its ``action``: not replayed, and the
    reasoning item before it is not left without its following item."""
    reasoning = ThinkingPart(
        text="search", summary=["search"], encrypted_content="ENC", id="rs_1", provenance=GPT
    )
    messages: list[Message] = [
        user("weather?"),
        AssistantMessage(
            content=[reasoning, _search_item("in_progress", action=False)],
            provenance=GPT,
            status="partial",
        ),
        user("continue"),
    ]
    kwargs, warnings = render("openai-responses", messages)
    items = history(kwargs)
    assert "ws_00a6" not in dumped(items)
    assert not [i for i in items if i.get("type") == "reasoning"]
    assert any("'web_search'" in w.message for w in warnings if w.code == "server_tool_dropped")


def test_finished_server_item_is_still_replayed() -> None:
    messages: list[Message] = [
        user("weather?"),
        AssistantMessage(
            content=[_search_item("completed", action=True), TextPart(text="Sunny.")],
            provenance=GPT,
        ),
        user("thanks"),
    ]
    kwargs, warnings = render("openai-responses", messages)
    assert history(kwargs)[1]["id"] == "ws_00a6"
    assert "server_tool_dropped" not in codes(warnings)


# ---------------------------------------------------------------- instructions with media

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5E"
    "rkJggg=="
)
RESPONSES_BODY = {
    "model": "gpt-5",
    "input": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {
            "role": "developer",
            "content": [
                {"type": "input_text", "text": "reference screenshot:"},
                {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
            ],
        },
        {"role": "user", "content": "what do you see?"},
    ],
}


def _instruction_history() -> list[Message]:
    parsed = module("openai-responses").parse_request(msgspec.json.decode(dumped(RESPONSES_BODY)))
    return log_of(parsed).derive_messages()


def test_chat_instruction_image_moves_to_a_user_message_after_it() -> None:
    """Chat system/developer messages take text only: the text stays in the instruction,
    the image follows in a user message (the model still sees it, where it was)."""
    kwargs, warnings = render("openai-chat", _instruction_history())
    wire = history(kwargs)
    assert [m["role"] for m in wire] == ["user", "assistant", "system", "user", "user"]
    assert wire[2]["content"] == [{"type": "text", "text": "reference screenshot:"}]
    moved = wire[3]["content"]
    assert moved[0]["type"] == "text"
    assert moved[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert wire[4]["content"] == "what do you see?"
    assert "instruction_media_moved" in codes(warnings)


def test_responses_instruction_keeps_its_image() -> None:
    kwargs, warnings = render("openai-responses", _instruction_history())
    developer = history(kwargs)[2]
    assert developer["role"] == "developer"
    assert [part["type"] for part in developer["content"]] == ["input_text", "input_image"]
    assert "instruction_media_moved" not in codes(warnings)


# ---------------------------------------------------------------- settings per model family

THINKING_HEADER = RequestHeaderEvent(
    provider="anthropic",
    api="messages",
    model="claude-sonnet-4-5",
    sampling={"max_tokens": 8000, "thinking": {"type": "enabled", "budget_tokens": 4096}},
)
TEMPERATURE_HEADER = RequestHeaderEvent(
    provider="anthropic",
    api="messages",
    model="claude-sonnet-4-5",
    sampling={"max_tokens": 1000, "temperature": 0.2},
)


def _dropped_for_model(warnings: list[WarningEvent], model: str) -> list[str]:
    return [
        setting
        for w in warnings
        if w.code == "setting_dropped" and w.details and w.details.get("model") == model
        for setting in w.details["settings"]
    ]


@pytest.mark.parametrize(
    ("target", "key"), [("openai-chat", "reasoning_effort"), ("openai-responses", "reasoning")]
)
def test_reasoning_effort_not_sent_to_a_model_without_reasoning(target: str, key: str) -> None:
    kwargs, warnings = render(target, [user("hi")], THINKING_HEADER, RenderPolicy(model="gpt-4o"))
    assert key not in flatten(kwargs)
    assert _dropped_for_model(warnings, "gpt-4o") == [key]
    reasoning, _ = render(target, [user("hi")], THINKING_HEADER, RenderPolicy(model="gpt-5"))
    assert key in flatten(reasoning)  # a reasoning model still gets it


@pytest.mark.parametrize(
    ("target", "model"), [("openai-chat", "gpt-5"), ("openai-responses", "o3")]
)
def test_temperature_not_sent_to_a_reasoning_model(target: str, model: str) -> None:
    kwargs, warnings = render(target, [user("hi")], TEMPERATURE_HEADER, RenderPolicy(model=model))
    assert "temperature" not in flatten(kwargs)
    assert _dropped_for_model(warnings, model) == ["temperature"]
    plain, _ = render(target, [user("hi")], TEMPERATURE_HEADER, RenderPolicy(model="gpt-4o"))
    assert flatten(plain)["temperature"] == 0.2


def test_same_api_settings_are_checked_against_the_target_model_too() -> None:
    header = RequestHeaderEvent(
        provider="openai", api="chat", model="gpt-4o", sampling={"temperature": 0.2}
    )
    kwargs, warnings = render("openai-chat", [user("hi")], header, RenderPolicy(model="o3"))
    assert "temperature" not in flatten(kwargs)
    assert _dropped_for_model(warnings, "o3") == ["temperature"]


def test_thinking_not_enabled_for_a_claude_without_it() -> None:
    """A translated reasoning effort for a Claude with no extended thinking is dropped
    before it costs the temperature (thinking's conflict) anything."""
    header = RequestHeaderEvent(
        provider="openai",
        api="responses",
        model="gpt-5",
        sampling={"reasoning": {"effort": "high"}, "temperature": 0.3},
    )
    model = "claude-3-5-sonnet-20241022"
    kwargs, warnings = render("anthropic", [user("hi")], header, RenderPolicy(model=model))
    body = flatten(kwargs)
    assert "thinking" not in body and body["temperature"] == 0.3
    assert _dropped_for_model(warnings, model) == ["thinking"]


# ---------------------------------------------------------------- tool names in the history


def _call_names(target: str, wire: list[dict[str, Any]]) -> list[str]:
    if target == "anthropic":
        return [b["name"] for m in wire for b in m["content"] if b.get("type") == "tool_use"]
    if target == "openai-chat":
        return [c["function"]["name"] for m in wire for c in m.get("tool_calls") or []]
    return [i["name"] for i in wire if i.get("type") == "function_call"]


def _declared_names(target: str, tools: list[dict[str, Any]]) -> list[str]:
    if target == "openai-chat":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


DOTTED_CALL: list[Message] = [
    user("search docs"),
    AssistantMessage(
        provenance=CLAUDE,
        content=[ToolCallPart(id="toolu_1", name="docs.search", arguments={"q": "x"})],
    ),
    ToolMessage(call_id="toolu_1", content=[TextPart(text="found")]),
    user("thanks"),
]


@pytest.mark.parametrize("target", TARGETS)
def test_history_call_names_are_mapped_like_the_declared_tool(target: str) -> None:
    """OpenAI validates the names of history calls too ("string does not match pattern
    '^[a-zA-Z0-9_-]+$'"): a call and the declared tool get the one mapped name."""
    header = msgspec.structs.replace(
        HEADERS[target],
        tools=[ToolSpec(name="docs.search", input_schema={"type": "object"})],
    )
    kwargs, warnings = render(target, DOTTED_CALL, header)
    (call_name,) = _call_names(target, history(kwargs))
    assert OPENAI_TOOL_NAME.fullmatch(call_name)
    assert _declared_names(target, kwargs["tools"]) == [call_name]
    assert call_name == map_tool_name("docs.search", header.api or "")
    (mapped,) = [w for w in warnings if w.code == "tool_name_mapped"]
    assert mapped.details == {"names": {"docs.search": call_name}}


@pytest.mark.parametrize("target", ["openai-chat", "openai-responses"])
def test_history_call_names_are_mapped_without_a_declared_tool(target: str) -> None:
    kwargs, warnings = render(target, DOTTED_CALL)
    (call_name,) = _call_names(target, history(kwargs))
    assert OPENAI_TOOL_NAME.fullmatch(call_name) and "docs_search" in call_name
    assert "tool_name_mapped" in codes(warnings)


def test_tool_name_mapping_is_stable_idempotent_and_distinct() -> None:
    mapped = map_tool_name("docs.search", "chat")
    assert map_tool_name("docs.search", "chat") == mapped
    assert map_tool_name(mapped, "chat") == mapped  # a call made under it stays the tool
    assert map_tool_name("docs_search", "chat") == "docs_search"  # accepted: unchanged
    assert map_tool_name("docs:search", "chat") != mapped
    long_name = "mcp__claude_ai_Google_Drive__search_files_in_shared_drive_folder_v2"
    assert map_tool_name(long_name, "messages") == long_name  # Anthropic takes 128
    assert len(map_tool_name(long_name, "responses")) <= 64


def test_tool_choice_names_the_mapped_tool() -> None:
    header = RequestHeaderEvent(
        provider="anthropic",
        api="messages",
        model="claude-sonnet-4-5",
        tools=[ToolSpec(name="docs.search", input_schema={"type": "object"})],
        sampling={"tool_choice": {"type": "tool", "name": "docs.search"}},
    )
    kwargs, _ = render("openai-chat", [user("hi")], header, RenderPolicy(model="gpt-4o"))
    chosen = kwargs["tool_choice"]["function"]["name"]
    assert OPENAI_TOOL_NAME.fullmatch(chosen) and chosen == kwargs["tools"][0]["function"]["name"]


def test_a_same_api_tool_choice_names_the_mapped_tool() -> None:
    """A Chat header forcing a tool whose name Chat refuses: the choice names the tool as
    it is declared (it used to name ``docs.search``, a tool the request did not offer)."""
    header = RequestHeaderEvent(
        provider="openai",
        api="chat",
        model="gpt-4o",
        tools=[ToolSpec(name="docs.search", input_schema={"type": "object"})],
        sampling={"tool_choice": {"type": "function", "function": {"name": "docs.search"}}},
    )
    kwargs, _ = render("openai-chat", [user("hi")], header, RenderPolicy(model="gpt-4o"))
    chosen = kwargs["tool_choice"]["function"]["name"]
    assert OPENAI_TOOL_NAME.fullmatch(chosen) and chosen == kwargs["tools"][0]["function"]["name"]


def test_mapped_names_render_the_same_with_the_render_cache() -> None:
    cache = RenderCache()
    longer = [*DOTTED_CALL, *DOTTED_CALL[1:]]
    render("openai-chat", DOTTED_CALL, cache=cache)
    cached, cached_warnings = render("openai-chat", longer, cache=cache)
    fresh, fresh_warnings = render("openai-chat", longer)
    assert cached == fresh and cached_warnings == fresh_warnings
    assert codes(fresh_warnings).count("tool_name_mapped") == 1


# ---------------------------------------------------------------- shared ids: pair by name


def _parallel_calls_sharing_an_id(first_name: str | None, second_name: str | None) -> list[Message]:
    """Two parallel calls given one id; the second finished first (results logged in
    completion order)."""
    origin = Provenance(provider="openai", api="chat", model="some-compatible-model")
    return [
        user("weather and time in Paris?"),
        AssistantMessage(
            provenance=origin,
            content=[
                ToolCallPart(id="call_0", name="get_weather", arguments={"city": "Paris"}),
                ToolCallPart(id="call_0", name="get_time", arguments={"tz": "Europe/Paris"}),
            ],
        ),
        ToolMessage(call_id="call_0", name=first_name, content=[TextPart(text="14:05")]),
        ToolMessage(call_id="call_0", name=second_name, content=[TextPart(text="sunny")]),
        user("thanks"),
    ]


def _answers(target: str, wire: list[dict[str, Any]]) -> dict[str, Any]:
    """Tool name → the result content paired with its call."""
    if target == "anthropic":
        names = {
            b["id"]: b["name"] for m in wire for b in m["content"] if b.get("type") == "tool_use"
        }
        return {
            names[b["tool_use_id"]]: b["content"]
            for m in wire
            for b in m["content"]
            if b.get("type") == "tool_result"
        }
    if target == "openai-chat":
        names = {c["id"]: c["function"]["name"] for m in wire for c in m.get("tool_calls") or []}
        return {names[m["tool_call_id"]]: m["content"] for m in wire if m["role"] == "tool"}
    names = {i["call_id"]: i["name"] for i in wire if i.get("type") == "function_call"}
    return {names[i["call_id"]]: i["output"] for i in wire if "output" in i}


@pytest.mark.parametrize("target", TARGETS)
def test_results_of_a_shared_id_pair_with_the_call_they_name(target: str) -> None:
    kwargs, warnings = render(target, _parallel_calls_sharing_an_id("get_time", "get_weather"))
    answers = _answers(target, history(kwargs))
    assert answers["get_time"] in ("14:05", [{"type": "text", "text": "14:05"}])
    assert answers["get_weather"] in ("sunny", [{"type": "text", "text": "sunny"}])
    (shared,) = [w for w in warnings if w.code == "tool_id_shared"]
    assert shared.details is not None and shared.details["paired_by"] == "name"


def test_a_named_result_is_paired_first_whatever_the_order() -> None:
    """An unnamed result before a named one does not take the named one's call."""
    kwargs, warnings = render("anthropic", _parallel_calls_sharing_an_id(None, "get_weather"))
    answers = _answers("anthropic", history(kwargs))
    assert answers == {"get_weather": "sunny", "get_time": "14:05"}
    (shared,) = [w for w in warnings if w.code == "tool_id_shared"]
    assert shared.details is not None and shared.details["paired_by"] == "name"


def test_unnamed_results_of_a_shared_id_pair_in_order_with_the_warning_saying_so() -> None:
    kwargs, warnings = render("anthropic", _parallel_calls_sharing_an_id(None, None))
    assert _answers("anthropic", history(kwargs)) == {"get_weather": "14:05", "get_time": "sunny"}
    (shared,) = [w for w in warnings if w.code == "tool_id_shared"]
    assert shared.details is not None and shared.details["paired_by"] == "order"
    assert "nothing in the log says" in shared.message


# ---------------------------------------------------------------- dated snapshots


def _anthropic(model: str) -> Provenance:
    return Provenance(provider="anthropic", api="messages", model=model)


def _responses(model: str) -> Provenance:
    return Provenance(provider="openai", api="responses", model=model)


@pytest.mark.parametrize(
    ("origin", "target", "same"),
    [
        (_anthropic("claude-3-5-sonnet-20240620"), _anthropic("claude-3-5-sonnet-20241022"), False),
        (_responses("gpt-4o-2024-05-13"), _responses("gpt-4o-2024-08-06"), False),
        # an alias and its dated snapshot stay one model (the API reports the snapshot)
        (_anthropic("claude-sonnet-4-20250514"), _anthropic("claude-sonnet-4-0"), True),
        (_anthropic("claude-3-5-sonnet-20241022"), _anthropic("claude-3-5-sonnet-latest"), True),
        (_responses("gpt-5-2025-08-07"), _responses("gpt-5"), True),
        (_responses("gpt-5-2025-08-07"), _responses("gpt-5-2025-08-07"), True),
    ],
)
def test_two_dated_snapshots_are_two_models(
    origin: Provenance, target: Provenance, same: bool
) -> None:
    assert same_origin(origin, target) is same
    assert same_origin(target, origin) is same


def test_signature_not_replayed_to_another_dated_snapshot() -> None:
    june = _anthropic("claude-3-5-sonnet-20240620")
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(
            provenance=june,
            content=[
                ThinkingPart(text="t", signature="SIG_FROM_0620", provenance=june),
                TextPart(text="ok"),
            ],
        ),
        user("again"),
    ]
    header = msgspec.structs.replace(HEADERS["anthropic"], model="claude-3-5-sonnet-20241022")
    kwargs, warnings = render("anthropic", messages, header)
    assert "SIG_FROM_0620" not in dumped(kwargs)
    assert codes(warnings) == ["reasoning_dropped"]


# ---------------------------------------------------------------- policy template


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("<thinking>{thinking}</thinking>", "unknown placeholder {thinking}"),
        ("{text} {", "Single '{'"),
        ('JSON: {"reasoning": "{text}"}', 'unknown placeholder {"reasoning"}'),
        ("{text:d}", "Unknown format code"),
        ("no placeholder", "no {text} placeholder"),
    ],
)
def test_a_bad_reasoning_template_is_a_render_error_when_the_policy_is_built(
    template: str, problem: str
) -> None:
    with pytest.raises(RenderError, match="foreign_reasoning_template") as raised:
        RenderPolicy(foreign_reasoning="text", foreign_reasoning_template=template)
    assert problem in str(raised.value)


def test_a_good_reasoning_template_formats_foreign_reasoning() -> None:
    policy = RenderPolicy(foreign_reasoning="text", foreign_reasoning_template="{{earlier}} {text}")
    messages: list[Message] = [
        user("q"),
        AssistantMessage(
            provenance=CLAUDE,
            content=[
                ThinkingPart(text="hmm", signature="S", provenance=CLAUDE),
                TextPart(text="a"),
            ],
        ),
        user("b"),
    ]
    kwargs, _ = render("openai-chat", messages, policy=policy)
    assert history(kwargs)[1]["content"] == "{earlier} hmm\n\na"
