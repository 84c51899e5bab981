"""``RenderCache``: a re-render reuses the groups a change left valid, and is exact.

Whatever happens between two renders of a session (turns appended, a message
replaced by a surface edit, the history cut short by a fork, a render that failed),
rendering with the cache gives exactly what rendering from scratch gives: the same
request and the same warnings.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters._render import Group, RenderCache, RenderPolicy, render_history
from tests.adapters.test_render_oracle import TARGETS, module
from universal_event.errors import RenderError
from universal_event.events import RequestHeaderEvent, WarningEvent
from universal_event.messages import AssistantMessage, Message, ToolMessage, UserMessage
from universal_event.parts import Provenance, TextPart, ThinkingPart, ToolCallPart

CLAUDE = Provenance(provider="anthropic", api="messages", model="claude-sonnet-4-5")
HEADERS = {
    "anthropic": RequestHeaderEvent(provider="anthropic", api="messages", model=CLAUDE.model),
    "openai-chat": RequestHeaderEvent(provider="openai", api="chat", model="gpt-4o"),
    "openai-responses": RequestHeaderEvent(provider="openai", api="responses", model="gpt-5"),
}


def render(
    target: str, messages: list[Message], cache: RenderCache | None = None
) -> tuple[dict[str, Any], list[Any]]:
    warnings: list[WarningEvent] = []
    kwargs: dict[str, Any] = module(target).render_request(
        messages, HEADERS[target], RenderPolicy(), warnings=warnings, cache=cache
    )
    return kwargs, msgspec.to_builtins(warnings)


def history(kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    value: list[dict[str, Any]] = kwargs.get("messages", kwargs.get("input"))
    return value


def turn(index: int, *, answered: bool = True) -> list[Message]:
    call_id = f"call_{index}"
    messages: list[Message] = [
        AssistantMessage(
            content=[
                ThinkingPart(text="hm", signature=f"SIG{index}", provenance=CLAUDE),
                TextPart(text=f"step {index}"),
                ToolCallPart(id=call_id, name="read", arguments={"n": index}),
            ],
            provenance=CLAUDE,
        )
    ]
    if answered:
        messages.append(ToolMessage(call_id=call_id, content=[TextPart(text=f"out {index}")]))
    return messages


def session(turns: int) -> list[Message]:
    messages: list[Message] = [UserMessage(content=[TextPart(text="start")])]
    for index in range(turns):
        messages.extend(turn(index))
    return messages


@pytest.mark.parametrize("target", TARGETS)
def test_rerender_after_append_reuses_groups_and_equals_a_full_render(target: str) -> None:
    cache = RenderCache()
    before = session(6)
    first, _ = render(target, before, cache)
    after = [*before, *turn(6)]
    again, warnings = render(target, after, cache)
    assert (again, warnings) == render(target, after)
    # the groups before the change were not rendered again: the same dicts come back
    assert history(again)[1] is history(first)[1]
    assert history(again)[: len(history(first)) - 3] == history(first)[: len(history(first)) - 3]


@pytest.mark.parametrize("target", TARGETS)
def test_rerender_after_replace_and_cut_equals_a_full_render(target: str) -> None:
    cache = RenderCache()
    messages = session(6)
    render(target, messages, cache)
    replaced = list(messages)
    replaced[5] = ToolMessage(call_id="call_2", content=[TextPart(text="compressed")])
    assert render(target, replaced, cache) == render(target, replaced)
    cut = replaced[:4]  # a fork: the last call now has no result (rule 6 repairs it)
    rendered, warnings = render(target, cut, cache)
    assert (rendered, warnings) == render(target, cut)
    assert [w["code"] for w in warnings].count("synthetic_tool_result") == 1
    assert render(target, session(7), cache) == render(target, session(7))


@pytest.mark.parametrize("target", TARGETS)
def test_the_caller_owns_what_it_gets(target: str) -> None:
    """Mutating a returned request leaves the cache's copy alone."""
    cache = RenderCache()
    messages = session(3)
    kwargs, _ = render(target, messages, cache)
    history(kwargs).clear()
    assert render(target, [*messages, *turn(3)], cache) == render(target, [*messages, *turn(3)])


def test_a_failed_render_leaves_no_half_updated_cache() -> None:
    """A renderer that raises half-way (after writing some wire messages) must not
    leave those in the cache for the next render."""
    policy = RenderPolicy()
    messages = session(4)

    def echo(group: Group, out: list[dict[str, Any]]) -> None:
        out.append({"seq": group.assistant.seq if group.assistant else -1, "n": len(out)})
        for result in group.results:
            out.append({"result": result.call_id})

    def failing(group: Group, out: list[dict[str, Any]]) -> None:
        echo(group, out)
        if group.assistant is not None and group.assistant.seq == 9:
            raise RenderError("boom")

    numbered = [msgspec.structs.replace(m, seq=i) for i, m in enumerate(messages)]
    cache = RenderCache()
    render_history(numbered[:5], echo, policy, cache=cache, cache_key="k")
    added = [*turn(9), *turn(10)]  # the failing group is not the last one
    longer = [*numbered, *[msgspec.structs.replace(m, seq=9 + i) for i, m in enumerate(added)]]
    with pytest.raises(RenderError):
        render_history(longer, failing, policy, cache=cache, cache_key="k")
    assert render_history(longer, echo, policy, cache=cache, cache_key="k") == render_history(
        longer, echo, policy
    )


# ---------------------------------------------------------------- any edit sequence


def _message(kind: int, index: int) -> Message:
    """One message of a small alphabet: calls, results (some orphans), users, text."""
    if kind == 0:
        return UserMessage(content=[TextPart(text=f"u{index}")])
    if kind == 1:
        return AssistantMessage(
            content=[TextPart(text=f"a{index}"), ToolCallPart(id=f"c{index % 3}", name="f")],
            provenance=CLAUDE,
        )
    if kind == 2:
        return AssistantMessage(content=[TextPart(text=f"t{index}")], provenance=CLAUDE)
    return ToolMessage(call_id=f"c{index % 3}", content=[TextPart(text=f"r{index}")])


_histories = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 5)).map(lambda t: _message(*t)),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(st.lists(_histories, min_size=2, max_size=4), st.sampled_from(TARGETS))
def test_any_sequence_of_histories_renders_as_without_cache(
    versions: list[list[Message]], target: str
) -> None:
    cache = RenderCache()
    for index, messages in enumerate(versions):
        # later versions often extend or edit the one before, as sessions do
        if index and messages and index % 2:
            messages = [*versions[index - 1], *messages]
        assert render(target, messages, cache) == render(target, messages)
