"""Every renderer rule of DESIGN.md, one test (or a few) named after it.

Each rendered request is validated against the SDK's own parameter types (deep walk),
so a rule that "works" by producing something the API would reject still fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters._render import (
    ANTHROPIC_TOOL_IDS,
    CHAT_TOOL_IDS,
    RESPONSES_TOOL_IDS,
    RenderCache,
    RenderPolicy,
    ToolIdMapper,
    map_tool_call_id,
)
from tests.adapters._render_support import validate_history, validate_request
from tests.adapters.test_render_oracle import TARGETS, module
from universal_event.errors import DecodeError, RenderError
from universal_event.events import (
    AssistantMessageEvent,
    NativeUnknownEvent,
    RequestHeaderEvent,
    ToolSpec,
    UserMessageEvent,
    WarningEvent,
)
from universal_event.log import SessionLog
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import (
    ImagePart,
    Provenance,
    RefusalPart,
    ServerToolCallPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
)

CLAUDE = Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-5")
OTHER_CLAUDE = Provenance(provider="anthropic", api="messages", model="claude-opus-4-1")
GPT = Provenance(provider="openai", api="responses", model="gpt-5")
CHAT = Provenance(provider="openai", api="chat", model="gpt-4o")
HEADERS = {
    "anthropic": RequestHeaderEvent(provider="anthropic", api="messages", model=CLAUDE.model),
    "openai-chat": RequestHeaderEvent(provider="openai", api="chat", model=CHAT.model),
    "openai-responses": RequestHeaderEvent(provider="openai", api="responses", model=GPT.model),
}


def render(
    target: str,
    messages: list[Message],
    header: RequestHeaderEvent | None = None,
    **policy: Any,
) -> tuple[dict[str, Any], list[WarningEvent]]:
    warnings: list[WarningEvent] = []
    kwargs: dict[str, Any] = module(target).render_request(
        messages, header or HEADERS[target], RenderPolicy(**policy), warnings=warnings
    )
    validate_history(target, kwargs)
    validate_request(target, kwargs)
    return kwargs, warnings


def history(kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = kwargs.get("messages", kwargs.get("input"))
    return value


def user(text: str) -> UserMessage:
    return UserMessage(content=[TextPart(text=text)])


def signed(origin: Provenance) -> ThinkingPart:
    return ThinkingPart(
        text="let me think", signature="SIG-" + str(origin.model), provenance=origin
    )


def encrypted(origin: Provenance, item: str = "rs_1") -> ThinkingPart:
    return ThinkingPart(
        text="summary one",
        summary=["summary one"],
        encrypted_content="ENC",
        id=item,
        provenance=origin,
    )


def call(call_id: str = "call_1", name: str = "get") -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments={"q": 1})


def result(call_id: str = "call_1", text: str = "done", **fields: Any) -> ToolMessage:
    return ToolMessage(call_id=call_id, content=[TextPart(text=text)], **fields)


def dumped(value: Any) -> str:
    return msgspec.json.encode(value).decode()


# ---------------------------------------------------------------- rule 1


def test_rule_1_signature_replayed_only_to_same_model() -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[signed(CLAUDE), TextPart(text="a")], provenance=CLAUDE),
        user("again"),
    ]
    same, _ = render("anthropic", messages)
    assert history(same)[1]["content"][0] == {
        "type": "thinking",
        "thinking": "let me think",
        "signature": "SIG-claude-sonnet-4-5",
    }
    other_header = msgspec.structs.replace(HEADERS["anthropic"], model=OTHER_CLAUDE.model)
    other, warnings = render("anthropic", messages, other_header)
    assert "SIG-" not in dumped(other)
    assert [w.code for w in warnings] == ["reasoning_dropped"]


def test_rule_1_encrypted_reasoning_replayed_only_to_same_model() -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(
            content=[encrypted(GPT), TextPart(text="a", item_id="msg_1")], provenance=GPT
        ),
        user("again"),
    ]
    same, _ = render("openai-responses", messages)
    assert history(same)[1]["encrypted_content"] == "ENC"
    for model in ("gpt-5-mini", "o3"):
        header = msgspec.structs.replace(HEADERS["openai-responses"], model=model)
        other, _ = render("openai-responses", messages, header)
        assert "ENC" not in dumped(other) and "rs_1" not in dumped(other)


def test_rule_1_snapshot_and_alias_are_the_same_model() -> None:
    snapshot = Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-20250514")
    header = msgspec.structs.replace(HEADERS["anthropic"], model="claude-sonnet-4-0")
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[signed(snapshot), TextPart(text="a")], provenance=snapshot),
        user("again"),
    ]
    kwargs, _ = render("anthropic", messages, header)
    assert history(kwargs)[1]["content"][0]["type"] == "thinking"


def test_rule_1_no_provider_bound_reasoning_crosses_providers() -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[signed(CLAUDE), TextPart(text="a")], provenance=CLAUDE),
        AssistantMessage(content=[encrypted(GPT), TextPart(text="b")], provenance=GPT),
        user("again"),
    ]
    for target in ("openai-chat", "openai-responses"):
        kwargs, _ = render(target, messages)
        assert "SIG-" not in dumped(kwargs)
    kwargs, _ = render("anthropic", messages)
    assert "ENC" not in dumped(kwargs) and "rs_1" not in dumped(kwargs)


# ---------------------------------------------------------------- rule 2


@pytest.mark.parametrize("target", TARGETS)
def test_rule_2_foreign_reasoning_policy_drop_or_text(target: str) -> None:
    origin = GPT if target == "anthropic" else CLAUDE
    part = signed(origin) if origin is CLAUDE else encrypted(origin)
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[part, TextPart(text="answer")], provenance=origin),
        user("again"),
    ]
    dropped, warnings = render(target, messages)
    assert part.text not in dumped(dropped)
    assert "reasoning_dropped" in [w.code for w in warnings]
    kept, warnings = render(
        target,
        messages,
        foreign_reasoning="text",
        foreign_reasoning_template="[earlier reasoning] {text}",
    )
    assert f"[earlier reasoning] {part.text}" in dumped(kept)
    assert "reasoning_as_text" in [w.code for w in warnings]
    # never a half-kept block: no thinking/reasoning block without its opaque payload
    for rendered in (dropped, kept):
        text = dumped(rendered)
        assert '"type":"thinking"' not in text and '"type":"redacted_thinking"' not in text
        assert '"type":"reasoning"' not in text


def test_rule_2_same_model_thinking_without_signature_is_not_half_kept() -> None:
    unsigned = ThinkingPart(text="partial thought", provenance=CLAUDE)
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[unsigned, TextPart(text="a")], provenance=CLAUDE),
        user("again"),
    ]
    kwargs, warnings = render("anthropic", messages)
    assert history(kwargs)[1]["content"] == [{"type": "text", "text": "a"}]
    assert [w.code for w in warnings] == ["reasoning_dropped"]


def test_rule_2_an_empty_redacted_block_is_not_sent() -> None:
    """A parsed body's ``redacted_thinking`` with ``data: ""`` holds nothing to replay:
    dropped as an unsigned block is, not sent empty."""
    empty = ThinkingPart(redacted_data="", provenance=CLAUDE)
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[empty, TextPart(text="a")], provenance=CLAUDE),
        user("again"),
    ]
    kwargs, warnings = render("anthropic", messages)
    assert history(kwargs)[1]["content"] == [{"type": "text", "text": "a"}]
    assert [w.code for w in warnings] == ["reasoning_dropped"]


# ---------------------------------------------------------------- rule 3


def _tool_loop(first: list[Any], origin: Provenance) -> list[Message]:
    return [
        user("use the tool"),
        AssistantMessage(content=[*first, call()], provenance=origin),
        result(),
    ]


def test_rule_3_thinking_enabled_last_assistant_turn_starts_with_thinking() -> None:
    header = msgspec.structs.replace(
        HEADERS["anthropic"], sampling={"thinking": {"type": "enabled", "budget_tokens": 1024}}
    )
    kwargs, warnings = render("anthropic", _tool_loop([signed(CLAUDE)], CLAUDE), header)
    assert kwargs["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert history(kwargs)[1]["content"][0]["type"] == "thinking"
    assert warnings == []


def test_rule_3_thinking_turned_off_with_warning_when_turn_has_no_thinking() -> None:
    header = msgspec.structs.replace(
        HEADERS["anthropic"], sampling={"thinking": {"type": "enabled", "budget_tokens": 1024}}
    )
    # the loop came from another model: its reasoning cannot be replayed
    kwargs, warnings = render("anthropic", _tool_loop([encrypted(GPT)], GPT), header)
    assert kwargs["thinking"] == {"type": "disabled"}
    assert "thinking_disabled" in [w.code for w in warnings]
    with pytest.raises(RenderError, match="does not start with a thinking block"):
        render("anthropic", _tool_loop([encrypted(GPT)], GPT), header, thinking_fallback="error")


def test_rule_3_new_user_turn_keeps_thinking_on() -> None:
    header = msgspec.structs.replace(
        HEADERS["anthropic"], sampling={"thinking": {"type": "enabled", "budget_tokens": 1024}}
    )
    messages: list[Message] = [
        user("q"),
        AssistantMessage(content=[TextPart(text="plain answer")], provenance=GPT),
        user("next question"),
    ]
    kwargs, warnings = render("anthropic", messages, header)
    assert kwargs["thinking"]["type"] == "enabled"
    assert warnings == []


def test_rule_3_results_followed_by_more_user_messages_still_continue_the_loop() -> None:
    """The API joins consecutive user messages: tool results, then a reminder, then
    the user's text are one turn that starts with the results."""
    header = msgspec.structs.replace(
        HEADERS["anthropic"], sampling={"thinking": {"type": "enabled", "budget_tokens": 1024}}
    )
    messages = [*_tool_loop([encrypted(GPT)], GPT), user("<reminder>"), user("now summarise")]
    kwargs, warnings = render("anthropic", messages, header)
    assert [m["role"] for m in history(kwargs)][-2:] == ["user", "user"]
    assert kwargs["thinking"] == {"type": "disabled"}
    assert "thinking_disabled" in [w.code for w in warnings]


# ---------------------------------------------------------------- rule 4


def test_rule_4_reasoning_item_paired_with_following_item() -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(
            content=[
                encrypted(GPT),
                ToolCallPart(id="call_1", name="get", arguments={}, item_id="fc_1"),
            ],
            provenance=GPT,
        ),
        result(),
    ]
    kwargs, _ = render("openai-responses", messages)
    items = history(kwargs)
    assert [item.get("type", "message") for item in items] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert items[2]["id"] == "fc_1" and items[2]["call_id"] == "call_1"


def test_rule_4_reasoning_without_following_item_is_dropped_with_ids() -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(
            content=[TextPart(text="a", item_id="msg_1"), encrypted(GPT)], provenance=GPT
        ),
        user("again"),
    ]
    kwargs, warnings = render("openai-responses", messages)
    assert "reasoning" not in dumped(history(kwargs))
    assert "msg_1" not in dumped(history(kwargs))  # no item left that pairs with a lost rs_
    assert "reasoning_dropped" in [w.code for w in warnings]


def test_rule_4_no_reasoning_item_goes_back_without_its_ids() -> None:
    """A cut turn's last reasoning item has nothing after it: it cannot go back, so the
    message's ids cannot either, and then neither can its other reasoning (an rs_ item
    before an fc_ item that lost its id is the pairing error of vercel/ai#7099)."""
    cut = AssistantMessage(
        content=[
            encrypted(GPT, "rs_1"),
            ToolCallPart(id="call_1", name="get", arguments={}, item_id="fc_1"),
            encrypted(GPT, "rs_2"),
        ],
        provenance=GPT,
        status="partial",
    )
    kwargs, warnings = render("openai-responses", [user("hi"), cut, result("call_1"), user("go")])
    wire = history(kwargs)
    assert [item.get("type", item.get("role")) for item in wire] == [
        "user", "function_call", "function_call_output", "user"
    ]  # fmt: skip
    assert "fc_1" not in dumped(wire) and "rs_" not in dumped(wire)
    assert [w.code for w in warnings] == ["reasoning_dropped", "reasoning_dropped"]


def test_rule_4_a_blank_text_is_no_following_item() -> None:
    """The text after the reasoning is blank and not sent (rule 8): the reasoning item
    would go out alone."""
    blank_after = AssistantMessage(
        content=[encrypted(GPT, "rs_1"), TextPart(text=" ", item_id="msg_1")], provenance=GPT
    )
    kwargs, warnings = render("openai-responses", [user("hi"), blank_after, user("go")])
    assert [item.get("role") for item in history(kwargs)] == ["user", "user"]
    assert [w.code for w in warnings] == ["reasoning_dropped"]


def test_rule_4_store_false_needs_encrypted_content() -> None:
    bare = ThinkingPart(text="s", summary=["s"], id="rs_9", provenance=GPT)
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[bare, TextPart(text="a", item_id="msg_9")], provenance=GPT),
        user("again"),
    ]
    stored, _ = render("openai-responses", messages)
    assert history(stored)[1] == {
        "type": "reasoning",
        "id": "rs_9",
        "summary": [{"type": "summary_text", "text": "s"}],
    }
    header = msgspec.structs.replace(HEADERS["openai-responses"], sampling={"store": False})
    unstored, warnings = render("openai-responses", messages, header)
    assert "rs_9" not in dumped(unstored) and "msg_9" not in dumped(unstored)
    assert "reasoning_dropped" in [w.code for w in warnings]


def test_rule_4_summary_always_present() -> None:
    nosummary = ThinkingPart(encrypted_content="ENC", id="rs_2", provenance=GPT)
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[nosummary, TextPart(text="a", item_id="msg_1")], provenance=GPT),
    ]
    kwargs, _ = render("openai-responses", messages)
    assert history(kwargs)[1]["summary"] == []


def _web_search_session() -> SessionLog:
    """A recorded gpt-5 turn: reasoning, web_search_call, reasoning, message."""
    from adapters import create_adapter

    path = Path(__file__).parents[1] / "fixtures/recorded/openai-responses"
    interaction = json.loads((path / "stream_web_search_call.json").read_text())["interactions"][0]
    log = SessionLog()
    adapter = create_adapter("openai-responses", session_id=log.session_id)
    question = interaction["request_body"]["input"][0]["content"]
    log.append(UserMessageEvent(content=[TextPart(text=question)]))
    log.extend(adapter.feed(interaction["response_body"].encode()))
    log.extend(adapter.close())
    log.append(UserMessageEvent(content=[TextPart(text="And tomorrow?")]))
    return log


def test_rule_4_server_item_does_not_go_back_without_its_reasoning() -> None:
    """A ``ws_`` item whose reasoning is not replayed (another model) is refused: "Item
    'ws_...' of type 'web_search_call' was provided without its required 'reasoning'
    item". Its input schema requires the id, so the item is dropped with a warning."""
    log = _web_search_session()
    messages = log.derive_messages()
    (search,) = [p for p in messages[1].content if isinstance(p, ServerToolCallPart)]
    same, _ = render("openai-responses", messages, log.current_header(), model="gpt-5")
    assert search.id in dumped(history(same))  # same model: replayed with its reasoning
    other, warnings = render("openai-responses", messages, log.current_header(), model="gpt-5-mini")
    assert search.id not in dumped(history(other))
    assert "web_search_call" not in dumped(history(other))
    assert "rs_" not in dumped(history(other))
    (dropped,) = [w for w in warnings if w.code == "server_tool_dropped"]
    assert search.id in dropped.message


def test_rule_4_server_item_whose_id_is_optional_goes_back_without_it() -> None:
    """A server item the input schema takes without an id (``shell_call``) keeps its
    place, as an ``fc_`` item does, but not its id."""
    shell = ServerToolCallPart(
        id="call_sh1",
        name="shell",
        native={
            "type": "shell_call",
            "id": "sh_1",
            "call_id": "call_sh1",
            "status": "completed",
            "action": {"commands": ["ls"]},
        },
        provenance=GPT,
    )
    messages: list[Message] = [
        user("list"),
        AssistantMessage(content=[encrypted(GPT), shell], provenance=GPT),
        result("call_sh1", "a.txt"),
        user("next"),
    ]
    kwargs, warnings = render("openai-responses", messages, model="gpt-5-mini")
    (item,) = [i for i in history(kwargs) if i.get("type") == "shell_call"]
    assert "id" not in item and item["call_id"] == "call_sh1"
    assert [w.code for w in warnings] == ["reasoning_dropped"]


# ---------------------------------------------------------------- rule 5


@pytest.mark.parametrize("target", TARGETS)
def test_rule_5_tool_call_ids_mapped_same_for_calls_and_results(target: str) -> None:
    awkward = "functions.get_weather:0|" + "x" * 470
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[call(awkward), call("call_ok", "other")], provenance=CHAT),
        result(awkward),
        result("call_ok"),
    ]
    kwargs, _ = render(target, messages)
    text = dumped(kwargs)
    fmt = {"anthropic": ANTHROPIC_TOOL_IDS, "openai-chat": CHAT_TOOL_IDS}.get(
        target, RESPONSES_TOOL_IDS
    )
    mapped = map_tool_call_id(awkward, fmt)
    assert fmt.accepts(mapped)
    assert text.count(mapped) == 2 and "call_ok" in text
    assert awkward not in text
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", mapped)


def test_rule_5_responses_call_ids_up_to_64_printable_characters_pass() -> None:
    """Responses takes ``|`` and ``.`` but rejects a ``call_id`` over 64 characters
    (``string_above_max_length``): 64 pass unchanged, 65 are mapped down."""
    fits = "functions.get_weather:0|" + "x" * 40
    too_long = fits + "y"
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[call(fits), call(too_long, "other")], provenance=CHAT),
        result(fits),
        result(too_long),
    ]
    kwargs, _ = render("openai-responses", messages)
    call_ids = [item["call_id"] for item in history(kwargs) if "call_id" in item]
    mapped = map_tool_call_id(too_long, RESPONSES_TOOL_IDS)
    assert call_ids == [fits, mapped, fits, mapped]
    assert len(fits) == 64 and len(mapped) <= 64 and mapped != fits


def test_rule_5_responses_call_id_is_not_the_item_id() -> None:
    part = ToolCallPart(id="toolu_01A", name="get", arguments={}, item_id="fc_77", provenance=GPT)
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[part], provenance=GPT),
        result("toolu_01A"),
    ]
    kwargs, _ = render("openai-responses", messages)
    assert history(kwargs)[1] == {
        "type": "function_call",
        "call_id": "toolu_01A",
        "name": "get",
        "arguments": "{}",
        "id": "fc_77",
    }
    assert history(kwargs)[2]["call_id"] == "toolu_01A"
    other = msgspec.structs.replace(HEADERS["openai-responses"], model="gpt-4.1")
    kwargs, _ = render("openai-responses", messages, other)
    assert "fc_77" not in dumped(kwargs)  # an item id goes back to its origin only


@given(st.lists(st.text(min_size=1, max_size=600), min_size=1, max_size=30, unique=True))
def test_rule_5_mapping_is_deterministic_collision_free_and_reversible(ids: list[str]) -> None:
    for fmt in (ANTHROPIC_TOOL_IDS, CHAT_TOOL_IDS, RESPONSES_TOOL_IDS):
        mapper = ToolIdMapper(fmt)
        mapped = [mapper.forward(call_id) for call_id in ids]
        assert all(fmt.accepts(m) for m in mapped)
        assert len(set(mapped)) == len(ids)
        assert [map_tool_call_id(call_id, fmt) for call_id in ids] == mapped
        assert [mapper.reverse(m) for m in mapped] == ids


def test_rule_5_reserved_prefix_cannot_collide() -> None:
    long_id = "y" * 100
    mapped = map_tool_call_id(long_id, ANTHROPIC_TOOL_IDS)
    assert mapped.startswith("ue_")
    # an original id that looks like a mapped one is mapped too, never passed through
    assert map_tool_call_id(mapped, ANTHROPIC_TOOL_IDS) != mapped


# ---------------------------------------------------------------- rule 6


@pytest.mark.parametrize("target", TARGETS)
def test_rule_6_orphan_call_gets_synthetic_error_result(target: str) -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[call("call_a"), call("call_b")], provenance=CHAT),
        result("call_a"),
        user("what happened?"),
    ]
    kwargs, warnings = render(target, messages)
    text = dumped(kwargs)
    assert text.count("call_b") == 2
    assert "interrupted" in text
    assert [w.code for w in warnings] == ["synthetic_tool_result"]
    if target == "anthropic":
        synthetic = history(kwargs)[2]["content"][1]
        assert synthetic["is_error"] is True and synthetic["tool_use_id"] == "call_b"


@pytest.mark.parametrize("target", TARGETS)
def test_rule_6_orphan_result_dropped_with_warning(target: str) -> None:
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[TextPart(text="no tools")], provenance=CHAT),
        result("call_ghost", "stray"),
        user("next"),
    ]
    kwargs, warnings = render(target, messages)
    assert "call_ghost" not in dumped(kwargs) and "stray" not in dumped(kwargs)
    assert [w.code for w in warnings] == ["orphan_tool_result"]
    assert warnings[0].details == {"call_id": "call_ghost", "seq": -1}


SCREENSHOT = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
CALLER_BASE = {"status": "completed"}
SHELL_CHUNK = {"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}
CALLER_RUN = {
    "local_shell_call": (
        {"action": {"type": "exec", "command": ["ls"], "env": {}}},
        "a.txt\nb.txt",
        {"type": "function_call_output", "output": "a.txt\nb.txt"},
    ),
    "shell_call": (
        {"action": {"commands": ["ls"]}},
        [SHELL_CHUNK],
        {"type": "shell_call_output", "output": [SHELL_CHUNK]},
    ),
    "apply_patch_call": (
        {"operation": {"type": "update_file", "path": "a.py", "diff": "@@\n-a\n+b\n"}},
        "patched a.py",
        {"type": "apply_patch_call_output", "status": "completed", "output": "patched a.py"},
    ),
    "computer_call": (
        {"action": {"type": "screenshot"}, "pending_safety_checks": []},
        {"type": "computer_screenshot", "image_url": SCREENSHOT},
        {
            "type": "computer_call_output",
            "output": {"type": "computer_screenshot", "image_url": SCREENSHOT},
        },
    ),
}


def _caller_run_session(kind: str, answered: bool = True) -> SessionLog:
    """A Responses turn with one caller-run item of ``kind`` (logged by the adapter as
    an opaque server-tool part) and, when ``answered``, the output the caller sent."""
    from adapters import create_adapter

    fields, output, _ = CALLER_RUN[kind]
    item = {"type": kind, "id": "item_1", "call_id": "call_1", "status": "completed", **fields}
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-5",
        "output": [item],
        "usage": {"input_tokens": 5, "output_tokens": 5, "total_tokens": 10},
    }
    log = SessionLog()
    adapter = create_adapter("openai-responses", session_id=log.session_id)
    log.append(UserMessageEvent(content=[TextPart(text="go")]))
    log.extend(adapter.feed(json.dumps(body).encode()))
    log.extend(adapter.close())
    if answered:
        sent = {"type": f"{kind}_output", "call_id": "call_1", "output": output}
        log.extend(adapter.tool_outputs([sent]))
    return log


@pytest.mark.parametrize("kind", sorted(CALLER_RUN))
def test_rule_6_caller_run_item_goes_back_with_its_output(kind: str) -> None:
    """Shell / computer / apply-patch calls are opaque server-tool parts whose outputs
    the caller logs as tool results: not orphans (before: dropped, and OpenAI refused
    the call without it: "No tool output found for local shell call call_...")."""
    log = _caller_run_session(kind)
    kwargs, warnings = render("openai-responses", log.derive_messages(), log.current_header())
    items = history(kwargs)
    assert [i.get("type", i.get("role")) for i in items][1] == kind
    assert items[2] == {**CALLER_RUN[kind][2], "call_id": "call_1"}
    assert warnings == []


def test_rule_6_caller_run_item_without_output_gets_a_synthetic_one() -> None:
    log = _caller_run_session("local_shell_call", answered=False)
    kwargs, warnings = render("openai-responses", log.derive_messages(), log.current_header())
    output = history(kwargs)[2]
    assert output["type"] == "function_call_output" and output["call_id"] == "call_1"
    assert output["output"].startswith("[tool error] interrupted")
    assert [w.code for w in warnings] == ["synthetic_tool_result"]
    log = _caller_run_session("computer_call", answered=False)  # wants a screenshot
    kwargs, warnings = render("openai-responses", log.derive_messages(), log.current_header())
    assert "computer_call" not in dumped(history(kwargs))
    assert [w.code for w in warnings] == ["server_tool_dropped"]


def test_rule_6_caller_run_items_of_a_request_body_render_back_as_they_were() -> None:
    """A parsed body keeps a ``*_call_output`` item in the assistant message (no
    synthetic output beside it) and a ``function_call_output`` answering a local shell
    call (as Codex sends it) as a tool result (no orphan)."""
    from tests.adapters._render_support import log_of

    shell = {"type": "exec", "command": ["ls"], "env": {}}
    body = {
        "model": "gpt-5",
        "input": [
            {"role": "user", "content": "ls"},
            {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_1", **CALLER_BASE},
            {"type": "local_shell_call_output", "id": "call_1", "output": "a.txt"},
            {"type": "shell_call", "id": "sh_2", "call_id": "call_2", **CALLER_BASE},
            {"type": "shell_call_output", "call_id": "call_2", "output": [SHELL_CHUNK]},
            {"type": "local_shell_call", "id": "lsh_3", "call_id": "call_3", **CALLER_BASE},
            {"type": "function_call_output", "call_id": "call_3", "output": "b.txt"},
        ],
    }
    for item in body["input"][1::2]:
        item["action"] = shell if item["type"] == "local_shell_call" else {"commands": ["ls"]}
    log = log_of(module("openai-responses").parse_request(json.loads(dumped(body))))
    kwargs, warnings = render("openai-responses", log.derive_messages(), log.current_header())
    assert history(kwargs) == body["input"]
    assert warnings == []


@pytest.mark.parametrize("target", ["anthropic", "openai-chat"])
def test_rule_6_caller_run_item_output_is_dropped_with_its_call(target: str) -> None:
    """Another api gets neither the provider-bound call nor its output; the output is
    dropped as part of the call (``server_tool_dropped``), not as an orphan."""
    log = _caller_run_session("local_shell_call")
    header = HEADERS[target]
    kwargs, warnings = render(target, log.derive_messages(), header)
    assert "call_1" not in dumped(history(kwargs)) and "b.txt" not in dumped(history(kwargs))
    assert "orphan_tool_result" not in [w.code for w in warnings]
    assert [w.code for w in warnings][-1] == "server_tool_dropped"


# ---------------------------------------------------------------- rule 7


def _parallel() -> list[Message]:
    return [
        user("hi"),
        AssistantMessage(content=[call("call_a"), call("call_b")], provenance=CHAT),
        result("call_a", "A"),
        user("interjection"),
        result("call_b", "B"),
    ]


def test_rule_7_parallel_results_in_one_anthropic_user_message_before_text() -> None:
    kwargs, _ = render("anthropic", _parallel())
    last = history(kwargs)[2]
    assert last["role"] == "user"
    assert [block["type"] for block in last["content"]] == ["tool_result", "tool_result", "text"]
    assert len(history(kwargs)) == 3


def test_rule_7_chat_tool_messages_directly_after_assistant() -> None:
    kwargs, _ = render("openai-chat", _parallel())
    assert [m["role"] for m in history(kwargs)] == ["user", "assistant", "tool", "tool", "user"]


def test_rule_7_responses_outputs_after_calls() -> None:
    kwargs, _ = render("openai-responses", _parallel())
    kinds = [item.get("type") or item["role"] for item in history(kwargs)]
    assert kinds == [
        "user",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "user",
    ]


# ---------------------------------------------------------------- rule 8


@pytest.mark.parametrize("target", TARGETS)
def test_rule_8_no_empty_or_whitespace_text_blocks(target: str) -> None:
    messages: list[Message] = [
        UserMessage(content=[TextPart(text="q"), TextPart(text="  \n")]),
        AssistantMessage(content=[TextPart(text=""), TextPart(text=" "), call()], provenance=CHAT),
        ToolMessage(call_id="call_1", content=[TextPart(text="   ")]),
    ]
    kwargs, _ = render(target, messages)
    for message in history(kwargs):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            if block.get("type") in ("text", "input_text", "output_text"):
                assert block["text"].strip()
        if message.get("role") == "assistant" and isinstance(content, str):
            assert content.strip()
    if target == "anthropic":
        assert history(kwargs)[1]["content"] == [
            {"type": "tool_use", "id": "call_1", "name": "get", "input": {"q": 1}}
        ]
        assert history(kwargs)[2]["content"] == [{"type": "tool_result", "tool_use_id": "call_1"}]


# ---------------------------------------------------------------- rule 9


def test_rule_9_chat_images_in_tool_results_move_to_following_user_message() -> None:
    image = ImagePart(data="iVBORw0KGgo=", media_type="image/png")
    messages: list[Message] = [
        user("look"),
        AssistantMessage(content=[call("call_a"), call("call_b")], provenance=CHAT),
        ToolMessage(call_id="call_a", content=[TextPart(text="screenshot"), image]),
        result("call_b", "plain"),
    ]
    kwargs, _ = render("openai-chat", messages)
    roles = [m["role"] for m in history(kwargs)]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    tool = history(kwargs)[2]
    assert isinstance(tool["content"], list)
    assert "image" not in dumped(tool)
    moved = history(kwargs)[4]["content"]
    assert moved[0] == {"type": "text", "text": "Attachments of tool result call_a:"}
    assert moved[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
    # the other targets keep the image inside the result
    anthropic, _ = render("anthropic", messages)
    assert history(anthropic)[2]["content"][0]["content"][1]["type"] == "image"
    responses, _ = render("openai-responses", messages)
    assert history(responses)[3]["output"][1]["type"] == "input_image"


def _rounds(*call_ids: str) -> list[Message]:
    """One round per id: a call, its result, the next question."""
    kimi = Provenance(provider="moonshot", api="chat", model="kimi-k2")
    messages: list[Message] = [user("look it up")]
    for round_index, call_id in enumerate(call_ids):
        messages += [
            AssistantMessage(content=[call(call_id, "search")], provenance=kimi),
            result(call_id, f"found {round_index}"),
            user(f"and then {round_index}?"),
        ]
    return messages


def _calls_and_results(
    target: str, wire: list[dict[str, Any]]
) -> tuple[list[str], list[tuple[str, Any]]]:
    """The tool call ids of a rendered history, and its results as (call id, content)."""
    if target == "anthropic":
        calls = [b["id"] for m in wire for b in m["content"] if b.get("type") == "tool_use"]
        results = [
            (b["tool_use_id"], b["content"])
            for m in wire
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    elif target == "openai-chat":
        calls = [c["id"] for m in wire for c in m.get("tool_calls", [])]
        results = [(m["tool_call_id"], m["content"]) for m in wire if m["role"] == "tool"]
    else:
        calls = [i["call_id"] for i in wire if i.get("type") == "function_call"]
        results = [(i["call_id"], i["output"]) for i in wire if "output" in i]
    return calls, results


@pytest.mark.parametrize("target", TARGETS)
def test_rule_8_an_id_reused_in_a_later_round_is_made_unique(target: str) -> None:
    """Kimi numbers calls per response (``functions.search:0`` every round): each
    round's call and result stay paired under an id of their own; Anthropic would
    refuse the request otherwise ("tool_use ids must be unique")."""
    messages = _rounds("functions.search:0", "functions.search:0", "other", "functions.search:0")
    kwargs, warnings = render(target, messages)
    calls, results = _calls_and_results(target, history(kwargs))
    assert len(set(calls)) == 4
    assert results == list(zip(calls, ["found 0", "found 1", "found 2", "found 3"], strict=True))
    if target == "openai-responses":  # '#' is a printable character: no mapping needed
        assert calls == [
            "functions.search:0", "functions.search:0#1", "other", "functions.search:0#2"
        ]  # fmt: skip
    assert [w.code for w in warnings] == ["tool_id_reused", "tool_id_reused"]


def _shared_id_round(call_id: str, cities: tuple[str, ...]) -> list[Message]:
    """Parallel calls of one message sharing an id (a server that gives them one id,
    or none), their results logged under it, in call order."""
    return [
        AssistantMessage(
            content=[
                ToolCallPart(id=call_id, name="weather", arguments={"city": c}) for c in cities
            ]
        ),
        *(result(call_id, f"{city}: sunny") for city in cities),
        user("thanks"),
    ]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("call_id", ["call_same", ""])
def test_rule_8_calls_sharing_an_id_in_one_message_each_keep_their_result(
    target: str, call_id: str
) -> None:
    """Each call gets an id of its own and the results, in order, one each; nothing is
    dropped as an orphan (before: one tool_use id twice, and the second result lost)."""
    messages = [user("weather?"), *_shared_id_round(call_id, ("Paris", "Rome", "Oslo"))]
    kwargs, warnings = render(target, messages)
    calls, results = _calls_and_results(target, history(kwargs))
    assert len(set(calls)) == 3 and all(calls)
    answers = ["Paris: sunny", "Rome: sunny", "Oslo: sunny"]
    assert results == list(zip(calls, answers, strict=True))
    assert [w.code for w in warnings] == ["tool_id_shared"]


def test_rule_8_shared_ids_render_the_same_with_the_render_cache() -> None:
    renderer = module("anthropic").render_request
    header = HEADERS["anthropic"]
    cache = RenderCache()
    first = [user("go"), *_shared_id_round("c", ("a", "b")), *_shared_id_round("c", ("d",))]
    renderer(first, header, cache=cache)
    grown = [*first, *_shared_id_round("c", ("e", "f"))]
    assert renderer(grown, header, cache=cache) == renderer(grown, header)
    rewritten = [user("go"), *_shared_id_round("x", ("a",)), *grown[5:]]
    assert renderer(rewritten, header, cache=cache) == renderer(rewritten, header)
    assert renderer(grown, header, cache=cache) == renderer(grown, header)


def test_rule_8_unique_ids_are_the_same_with_the_render_cache() -> None:
    """Ids counted by earlier groups are part of the cached state: an append, and a
    rewrite of the history's middle, render as a fresh render does."""
    renderer = module("anthropic").render_request
    header = HEADERS["anthropic"]
    cache = RenderCache()
    history_so_far = _rounds("call_0", "call_0")
    renderer(history_so_far, header, cache=cache)
    grown = _rounds("call_0", "call_0", "call_0")
    assert renderer(grown, header, cache=cache) == renderer(grown, header)
    rewritten = _rounds("call_0", "call_9", "call_0")
    assert renderer(rewritten, header, cache=cache) == renderer(rewritten, header)
    assert renderer(grown, header, cache=cache) == renderer(grown, header)


# ---------------------------------------------------------------- rule 10


def test_rule_10_cache_control_kept_where_supported() -> None:
    cache = {"type": "ephemeral"}
    messages: list[Message] = [
        UserMessage(content=[TextPart(text="long doc", cache_control=cache)]),
        AssistantMessage(
            content=[
                signed(CLAUDE),
                ToolCallPart(id="t1", name="get", arguments={}, cache_control=cache),
            ],
            provenance=CLAUDE,
        ),
        ToolMessage(call_id="t1", content=[TextPart(text="r", cache_control=cache)]),
    ]
    kwargs, _ = render("anthropic", messages)
    wire = history(kwargs)
    assert wire[0]["content"][0]["cache_control"] == cache
    assert "cache_control" not in wire[1]["content"][0]  # thinking blocks cannot carry it
    assert wire[1]["content"][1]["cache_control"] == cache
    assert wire[2]["content"][0]["content"][0]["cache_control"] == cache
    off, _ = render("anthropic", messages, keep_cache_control=False)
    assert "cache_control" not in dumped(off)
    for target in ("openai-chat", "openai-responses"):
        other, _ = render(target, messages)
        assert "cache_control" not in dumped(other)


def test_rule_10_cache_control_on_the_tool_result_block_survives_parse_and_render() -> None:
    """Claude Code marks the last block of its request, often a ``tool_result``: the
    mark on the block itself is kept through parse → log → derive → render."""
    body = {
        "model": CLAUDE.model,
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "a.txt",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    }
                ],
            },
        ],
    }
    log = SessionLog()
    log.extend(module("anthropic").parse_request(body))
    kwargs = module("anthropic").render_request(log.derive_messages(), log.current_header())
    assert kwargs["messages"] == body["messages"]
    off = module("anthropic").render_request(
        log.derive_messages(), log.current_header(), RenderPolicy(keep_cache_control=False)
    )
    assert "cache_control" not in dumped(off)


def test_rule_10_at_most_four_cache_marks() -> None:
    """Anthropic refuses a fifth mark ("A maximum of 4 blocks with cache_control"): a
    history assembled from several requests drops its earliest message marks first,
    with a warning; the session's render cache keeps what it rendered."""
    cache = {"type": "ephemeral"}
    header = msgspec.structs.replace(
        HEADERS["anthropic"],
        system="sys",
        system_parts=[TextPart(text="sys", cache_control=cache)],
    )
    messages: list[Message] = []
    for turn in range(5):
        messages += [
            UserMessage(content=[TextPart(text=f"question {turn}", cache_control=cache)]),
            AssistantMessage(content=[TextPart(text=f"answer {turn}")], provenance=CLAUDE),
        ]
    render_cache = RenderCache()
    renderer = module("anthropic").render_request
    warnings: list[WarningEvent] = []
    kwargs = renderer(messages, header, warnings=warnings, cache=render_cache)
    validate_request("anthropic", kwargs)
    marked = [i for i, m in enumerate(kwargs["messages"]) if "cache_control" in dumped(m)]
    assert marked == [4, 6, 8] and kwargs["system"][0]["cache_control"] == cache
    assert [w.code for w in warnings] == ["cache_control_trimmed"]
    assert "6 blocks carry cache_control" in warnings[0].message
    few = renderer(messages[4:], header, cache=RenderCache())
    assert dumped(few).count("cache_control") == 4  # four: nothing to trim
    again = renderer(messages[:4], header, cache=render_cache)
    assert [i for i, m in enumerate(again["messages"]) if "cache_control" in dumped(m)] == [0, 2]
    cached_warnings: list[WarningEvent] = []
    cached = renderer(messages, header, warnings=cached_warnings, cache=render_cache)
    renderer(messages, header, cache=render_cache)  # every group from the cache now
    assert cached == kwargs and "cache_control_trimmed" in [w.code for w in cached_warnings]
    from_cache: list[WarningEvent] = []
    assert renderer(messages, header, warnings=from_cache, cache=render_cache) == kwargs
    assert "cache_control_trimmed" in [w.code for w in from_cache]


# ---------------------------------------------------------------- rule 11


def test_rule_11_system_prompt_placement_and_tools() -> None:
    spec = ToolSpec(
        name="get",
        description="Get it",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    messages: list[Message] = [user("hi")]
    anthropic, _ = render(
        "anthropic",
        messages,
        msgspec.structs.replace(HEADERS["anthropic"], system="Be brief.", tools=[spec]),
    )
    assert anthropic["system"] == "Be brief."
    assert anthropic["tools"] == [
        {"name": "get", "input_schema": spec.input_schema, "description": "Get it"}
    ]
    chat, _ = render(
        "openai-chat",
        messages,
        msgspec.structs.replace(HEADERS["openai-chat"], system="Be brief.", tools=[spec]),
    )
    assert history(chat)[0] == {"role": "system", "content": "Be brief."}
    assert chat["tools"] == [
        {
            "type": "function",
            "function": {"name": "get", "parameters": spec.input_schema, "description": "Get it"},
        }
    ]
    reasoning_model = msgspec.structs.replace(
        HEADERS["openai-chat"], model="o3-mini", system="Be brief."
    )
    chat_o3, _ = render("openai-chat", messages, reasoning_model)
    assert history(chat_o3)[0]["role"] == "developer"
    responses, _ = render(
        "openai-responses",
        messages,
        msgspec.structs.replace(HEADERS["openai-responses"], system="Be brief.", tools=[spec]),
    )
    assert responses["instructions"] == "Be brief."
    assert "Be brief." not in dumped(history(responses))
    assert responses["tools"] == [
        {
            "type": "function",
            "name": "get",
            "description": "Get it",
            "parameters": spec.input_schema,
            "strict": False,
        }
    ]


def test_rule_11_instructions_between_turns_keep_their_role() -> None:
    """A ``developer`` / ``system`` message inside the history (Codex opens its input
    with two; Chat apps inject them mid-conversation) stays an instruction where the
    target has the role, and becomes a user message with a warning where it has not."""
    messages: list[Message] = [
        UserMessage(content=[TextPart(text="sandbox: read-only")], instruction_role="developer"),
        user("hi"),
        AssistantMessage(content=[TextPart(text="hello")], provenance=CHAT),
        UserMessage(content=[TextPart(text="be brief")], instruction_role="system"),
        user("and now?"),
    ]
    responses, warnings = render("openai-responses", messages)
    assert [item["role"] for item in history(responses)] == [
        "developer", "user", "assistant", "system", "user"
    ]  # fmt: skip
    assert history(responses)[0]["content"] == "sandbox: read-only" and not warnings
    chat, _ = render("openai-chat", messages)  # gpt-4o: instructions speak as "system"
    assert [m["role"] for m in history(chat)] == ["system", "user", "assistant", "system", "user"]
    reasoning_model = msgspec.structs.replace(HEADERS["openai-chat"], model="o3")
    chat_o3, _ = render("openai-chat", messages, reasoning_model)
    assert [m["role"] for m in history(chat_o3)][3] == "developer"
    claude, warnings = render("anthropic", messages)
    assert [m["role"] for m in history(claude)] == ["user", "user", "assistant", "user", "user"]
    assert [w.code for w in warnings] == ["instruction_as_user", "instruction_as_user"]


@pytest.mark.parametrize("target", ["openai-chat", "openai-responses"])
def test_rule_11_parsed_instructions_between_turns_render_back(target: str) -> None:
    key = "messages" if target == "openai-chat" else "input"
    body: dict[str, Any] = {
        "model": "gpt-4o",
        key: [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "system", "content": "The user is now an admin."},
            {"role": "user", "content": "delete it"},
        ],
    }
    events = module(target).parse_request(body)
    instructions = [
        e.instruction_role
        for e in events
        if isinstance(e, UserMessageEvent) and e.instruction_role is not None
    ]
    # Chat: the leading system message is the header's prompt; Responses: an input item
    assert instructions == ["system"] * (1 if target == "openai-chat" else 2)
    log = SessionLog()
    log.extend(events)
    kwargs = module(target).render_request(log.derive_messages(), log.current_header())
    assert [m.get("role") for m in kwargs[key]] == ["system", "user", "assistant", "system", "user"]
    assert kwargs[key][3]["content"] == "The user is now an admin."


def test_rule_11_foreign_server_tools_and_settings_dropped_with_warning() -> None:
    header = RequestHeaderEvent(
        provider="anthropic",
        api="messages",
        model="claude-sonnet-4-5",
        tools=[
            ToolSpec(
                name="web_search",
                kind="server",
                native={"type": "web_search_20250305", "name": "web_search"},
            )
        ],
        sampling={
            "max_tokens": 1000,
            "temperature": 0.5,
            "top_k": 5,
            "tool_choice": {"type": "any"},
        },
    )
    warnings: list[WarningEvent] = []
    # gpt-4.1: a model that takes a temperature (a reasoning model would not, see
    # test_render_audit_fixes.py)
    kwargs = module("openai-responses").render_request(
        [user("hi")], header, RenderPolicy(model="gpt-4.1"), warnings=warnings
    )
    assert kwargs["model"] == "gpt-4.1"
    assert kwargs["max_output_tokens"] == 1000 and kwargs["temperature"] == 0.5
    assert kwargs["tool_choice"] == "required"
    assert "tools" not in kwargs and "top_k" not in dumped(kwargs)
    assert sorted(w.code for w in warnings) == ["setting_dropped", "tool_dropped"]


def _settings_for(target: str, source_api: str, sampling: dict[str, Any]) -> tuple[Any, list[str]]:
    header = RequestHeaderEvent(
        provider="anthropic" if source_api == "messages" else "openai",
        api=source_api,
        model="some-model",
        tools=[ToolSpec(name="get", input_schema={"type": "object", "properties": {}})],
        sampling=sampling,
    )
    warnings: list[WarningEvent] = []
    kwargs = module(target).render_request(
        [user("hi")], header, RenderPolicy(model="m"), warnings=warnings
    )
    kwargs = {**kwargs, **kwargs.pop("extra_body", {})}
    return kwargs, sorted(w.code for w in warnings)


def test_settings_a_chat_stop_string_becomes_an_anthropic_list() -> None:
    kwargs, codes = _settings_for("anthropic", "chat", {"stop": "END", "max_tokens": 50})
    assert kwargs["stop_sequences"] == ["END"] and codes == []
    kwargs, _ = _settings_for("anthropic", "chat", {"stop": ["A", "B"]})
    assert kwargs["stop_sequences"] == ["A", "B"]


@pytest.mark.parametrize("source_api", ["chat", "responses"])
def test_settings_reasoning_effort_none_leaves_thinking_off(source_api: str) -> None:
    """``none`` is an effort (gpt-5.1 and later): no reasoning, so no thinking."""
    sampling = (
        {"reasoning_effort": "none"} if source_api == "chat" else {"reasoning": {"effort": "none"}}
    )
    kwargs, codes = _settings_for("anthropic", source_api, sampling)
    assert "thinking" not in kwargs and codes == []
    other = "openai-responses" if source_api == "chat" else "openai-chat"
    kwargs, _ = _settings_for(other, source_api, sampling)
    assert kwargs.get("reasoning_effort", kwargs.get("reasoning")) in ("none", {"effort": "none"})


def test_settings_thinking_is_not_combined_with_what_anthropic_refuses_beside_it() -> None:
    """Thinking takes neither a forced tool choice nor a temperature (nor top_p < 0.95)."""
    forced, codes = _settings_for(
        "anthropic", "chat", {"reasoning_effort": "high", "tool_choice": "required"}
    )
    assert forced["tool_choice"] == {"type": "any"} and "thinking" not in forced
    assert codes == ["setting_conflict"]
    tempered, codes = _settings_for(
        "anthropic", "chat", {"reasoning_effort": "low", "temperature": 0.2, "top_p": 0.5}
    )
    assert tempered["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "temperature" not in tempered and "top_p" not in tempered
    assert codes == ["setting_conflict"]
    fine, codes = _settings_for("anthropic", "chat", {"reasoning_effort": "low", "top_p": 0.97})
    assert fine["top_p"] == 0.97 and "thinking" in fine and codes == []


def test_settings_a_tool_choice_with_no_equivalent_is_named_in_a_warning() -> None:
    allowed = {"type": "allowed_tools", "mode": "auto", "tools": []}
    kwargs, codes = _settings_for("anthropic", "chat", {"tool_choice": allowed})
    assert "tool_choice" not in kwargs and codes == ["setting_dropped"]


_GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}
_CHAT_CUSTOM_TOOL = {
    "type": "custom",
    "custom": {
        "name": "patch",
        "description": "Apply.",
        "format": {"type": "grammar", "grammar": {"syntax": "lark", "definition": "start: /.+/"}},
    },
}


@pytest.mark.parametrize(
    ("source", "native"),
    [
        (
            "responses",
            {"type": "custom", "name": "patch", "description": "Apply.", "format": _GRAMMAR},
        ),
        (
            "chat",
            _CHAT_CUSTOM_TOOL,
        ),
    ],
)
def test_custom_tools_keep_their_description_and_grammar(
    source: str, native: dict[str, Any]
) -> None:
    spec = ToolSpec(name="patch", description="Apply.", kind="custom", native=native)
    header = RequestHeaderEvent(provider="openai", api=source, model="m", tools=[spec])
    tools = {
        target: module(target).render_request([user("hi")], header, RenderPolicy(model="m"))[
            "tools"
        ][0]
        for target in TARGETS
    }
    assert tools["openai-chat"] == _CHAT_CUSTOM_TOOL
    assert tools["openai-responses"] == {
        "type": "custom",
        "name": "patch",
        "description": "Apply.",
        "format": _GRAMMAR,
    }
    # Anthropic has no grammar-constrained input: the model is told the grammar.
    assert "start: /.+/" in tools["anthropic"]["description"]
    assert tools["anthropic"]["description"].startswith("Apply.")


def test_tools_without_a_schema_or_with_a_refused_name_are_named_in_warnings() -> None:
    """A refused name is sent mapped (:func:`map_tool_name`), the mapping in a warning."""
    long_name = "mcp__claude_ai_Google_Drive__search_files_in_shared_drive_folder_v2"
    header = RequestHeaderEvent(
        provider="anthropic",
        api="messages",
        model="m",
        tools=[ToolSpec(name="Bash"), ToolSpec(name=long_name), ToolSpec(name="web.search")],
    )
    for target in TARGETS:
        warnings: list[WarningEvent] = []
        module(target).render_request(
            [user("hi")], header, RenderPolicy(model="m"), warnings=warnings
        )
        by_code = {w.code: w for w in warnings}
        assert by_code["tool_schema_missing"].details["tools"] == [
            "Bash",
            long_name,
            "web.search",
        ]
        names = by_code["tool_name_mapped"].details["names"]
        # 68 characters: within Anthropic's 128, over OpenAI's 64; a dot: refused by all
        assert list(names) == (
            ["web.search"] if target == "anthropic" else [long_name, "web.search"]
        )
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in names.values())


def test_anthropic_tool_input_is_always_an_object() -> None:
    messages: list[Message] = [
        user("go"),
        AssistantMessage(content=[ToolCallPart(id="t1", name="f", arguments=[1, 2])]),
        result("t1", "ok"),
    ]
    kwargs, _ = render("anthropic", messages)
    (tool_use,) = [b for b in history(kwargs)[1]["content"] if b["type"] == "tool_use"]
    assert tool_use["input"] == {"input": [1, 2]}


def test_render_needs_a_model() -> None:
    with pytest.raises(RenderError, match="no model"):
        module("anthropic").render_request([user("hi")], None)


@pytest.mark.parametrize("target", TARGETS)
def test_whole_request_validation_can_fail(target: str) -> None:
    """The SDK TypedDict check of the whole request is real: a bad tool or setting fails."""
    spec = ToolSpec(name="get", input_schema={"type": "object", "properties": {}})
    header = msgspec.structs.replace(HEADERS[target], system="Be brief.", tools=[spec])
    kwargs, _ = render(target, [user("hi")], header)
    assert kwargs["tools"]
    validate_request(target, kwargs)
    with pytest.raises(pydantic.ValidationError):
        validate_request(target, {**kwargs, "tools": [{"type": "no_such_tool_type"}]})
    with pytest.raises(pydantic.ValidationError):
        validate_request(target, {**kwargs, "tool_choice": 42})


def test_a_foreign_session_model_is_named_in_a_warning() -> None:
    """A Codex session (gpt model) rendered for Anthropic without a target model."""
    kwargs, warnings = render("anthropic", [user("hi")], HEADERS["openai-responses"])
    assert kwargs["model"] == "gpt-5"
    (foreign,) = [w for w in warnings if w.code == "model_foreign"]
    assert "gpt-5" in foreign.message and "--model" in foreign.message
    _, chosen = render("anthropic", [user("hi")], HEADERS["openai-responses"], model="claude-x")
    assert "model_foreign" not in [w.code for w in chosen]
    _, same_provider = render("openai-chat", [user("hi")], HEADERS["openai-responses"])
    assert "model_foreign" not in [w.code for w in same_provider]


# ---------------------------------------------------------------- bad request bodies


@pytest.mark.parametrize(
    ("target", "body", "path"),
    [
        ("anthropic", {"messages": [{"role": "user", "content": 5}]}, "$.messages[0]"),
        (
            "anthropic",
            {"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]},
            "$.messages[0]",
        ),
        ("anthropic", {"messages": [["x"]]}, "$.messages[0]"),
        ("anthropic", {"messages": 5}, "$.messages"),
        ("openai-chat", {"messages": [{"role": "user"}, {"role": "tool"}]}, "$.messages[1]"),
        (
            "openai-chat",
            {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": 5}}]}]},
            "$.messages[0]",
        ),
        ("openai-responses", {"input": [{"type": "function_call_output"}]}, "$.input[0]"),
        ("openai-responses", {"input": [None]}, "$.input[0]"),
        ("openai-responses", {"input": 5}, "$.input"),
    ],
)
def test_a_request_body_of_the_wrong_shape_is_a_decode_error_naming_where(
    target: str, body: dict[str, Any], path: str
) -> None:
    with pytest.raises(DecodeError) as info:
        module(target).parse_request({"model": "m", **body})
    assert info.value.path == path
    assert "request body of the wrong shape" in str(info.value)


@pytest.mark.parametrize(
    ("target", "key"),
    [("anthropic", "messages"), ("openai-chat", "messages"), ("openai-responses", "input")],
)
def test_a_message_in_a_role_the_format_lacks_is_kept_not_guessed(target: str, key: str) -> None:
    """Not credited to the model, not taken for the user: kept as native/unknown."""
    events = module(target).parse_request(
        {"model": "m", key: [{"role": "user", "content": "hi"}, {"role": "zz", "content": "?"}]}
    )
    (kept,) = [e for e in events if isinstance(e, NativeUnknownEvent)]
    assert kept.native_type == "zz" and f"$.{key}[1]" in kept.reason
    assert not any(isinstance(e, AssistantMessageEvent) for e in events)
    assert sum(isinstance(e, UserMessageEvent) for e in events) == 1


def test_an_anthropic_history_starting_with_the_assistant_is_named_in_a_warning() -> None:
    messages: list[Message] = [AssistantMessage(content=[TextPart(text="hi")]), user("ok")]
    _, warnings = render("anthropic", messages)
    assert [w.code for w in warnings] == ["first_message_not_user"]
    _, warnings = render("anthropic", [user("hi"), *messages])
    assert warnings == []


@pytest.mark.parametrize("target", TARGETS)
def test_an_empty_history_is_named_in_a_warning(target: str) -> None:
    warnings: list[WarningEvent] = []
    module(target).render_request([], HEADERS[target], warnings=warnings)
    assert [w.code for w in warnings] == ["empty_history"]


@pytest.mark.parametrize("raw", ['{"a":1e+16}', '{"a":NaN}', '{"a": 1}', '{"b":"Z\\u00fcrich"}'])
def test_call_arguments_the_compact_encoding_would_change_keep_their_text(raw: str) -> None:
    """What json_arguments sends back is the model's own text whenever encoding the
    parsed arguments would not give it (a float's spelling, NaN, spaces, escapes)."""
    from adapters._render import json_arguments, parse_arguments

    arguments, kept = parse_arguments(raw)
    part = ToolCallPart(id="c", name="f", arguments=arguments, arguments_raw=kept)
    assert json_arguments(part) == raw
    compact = '{"a":1,"b":"Zürich"}'
    assert parse_arguments(compact) == ({"a": 1, "b": "Zürich"}, None)


def test_call_arguments_with_a_lone_surrogate_are_kept_as_text_the_log_can_store() -> None:
    """Half an emoji (``\\ud83d``) decodes with json but cannot be encoded: the text is
    kept alone, so the event stores (it wedged every checkpoint after it)."""
    from adapters._render import parse_arguments
    from universal_event import codec

    raw = '{"note":"x\\ud83d"}'
    arguments, kept = parse_arguments(raw)
    assert (arguments, kept) == (None, raw)
    part = ToolCallPart(id="c", name="f", arguments=arguments, arguments_raw=kept)
    assert codec.encode(AssistantMessageEvent(content=[part]))


@pytest.mark.parametrize("target", TARGETS)
def test_call_arguments_that_are_not_json_are_sent_as_a_json_object(target: str) -> None:
    """A call cut off by max_tokens (``{"x": "trunc``): OpenAI-compatible servers (vLLM,
    llama-server, Kimi: MoonshotAI/kimi-cli#2196) refuse a history whose arguments do
    not parse. Every target gets the text under ``input`` of a JSON object."""
    raw = '{"x": "trunc'
    cut = ToolCallPart(id="call_1", name="a", arguments_raw=raw)
    messages: list[Message] = [
        user("hi"),
        AssistantMessage(content=[cut], provenance=CHAT, stop_reason="length"),
        user("continue"),
    ]
    kwargs, warnings = render(target, messages)
    wire = history(kwargs)
    if target == "anthropic":
        assert wire[1]["content"][0]["input"] == {"input": raw}
        return
    sent = (
        wire[1]["tool_calls"][0]["function"]["arguments"]
        if target == "openai-chat"
        else wire[1]["arguments"]
    )
    assert json.loads(sent) == {"input": raw}
    assert [w.code for w in warnings] == ["synthetic_tool_result", "tool_arguments_invalid"]


def test_chat_refusal_only_turn_has_content() -> None:
    """``ChatCompletionAssistantMessageParam.content`` is "Required unless tool_calls or
    function_call is specified": a refused turn carries an empty one beside its refusal."""
    refused = AssistantMessage(
        content=[RefusalPart(text="I can't help with that.")], provenance=CHAT
    )
    kwargs, _ = render("openai-chat", [user("pick a lock"), refused, user("ok")])
    assert history(kwargs)[1] == {
        "role": "assistant",
        "content": "",
        "refusal": "I can't help with that.",
    }
