"""Request epochs (request/header) and the compression / pruning surface operations."""

from __future__ import annotations

import pytest

from tests.log.conftest import add_turn
from universal_event import (
    CompressionEndEvent,
    CompressionPruneEvent,
    CompressionStartEvent,
    CompressionSummaryEvent,
    RequestHeaderEvent,
    SessionLog,
    SurfaceError,
    TextPart,
    ToolMessage,
    ToolResultEvent,
    ToolSpec,
    UserMessage,
    UserMessageEvent,
)
from universal_event.stores import open_store

BASH = ToolSpec(name="bash", input_schema={"type": "object"})


def header(**changes: object) -> RequestHeaderEvent:
    fields: dict[str, object] = {
        "provider": "anthropic",
        "api": "messages",
        "model": "claude-test",
        "system": "be brief",
        "tools": [BASH],
        "sampling": {"max_tokens": 1024},
        "adapter_defaults": {"temperature": 1.0, "max_tokens": 4096},
    }
    fields.update(changes)
    return RequestHeaderEvent(**fields)  # type: ignore[arg-type]


def headers_in(log: SessionLog) -> list[RequestHeaderEvent]:
    return [e for e in log.events() if isinstance(e, RequestHeaderEvent)]


# ---------------------------------------------------------------- request epochs


def test_header_is_written_at_the_first_request_and_only_on_change() -> None:
    log = SessionLog()
    assert log.current_header() is None
    with log.before_request(header()):
        pass
    with log.before_request(header()):
        pass
    assert len(headers_in(log)) == 1
    with log.before_request(header(model="claude-other")):
        pass
    with log.before_request(header(system="be verbose")):
        pass
    with log.before_request(header(tools=[])):
        pass
    with log.before_request(header(sampling={"max_tokens": 10})):
        pass
    assert [h.model for h in headers_in(log)] == ["claude-test", "claude-other"] + [
        "claude-test"
    ] * 3
    assert log.store.latest_seq(log.session_id) == log.next_seq - 1  # checkpointed


def test_a_change_of_system_block_cache_hints_is_a_new_epoch() -> None:
    from universal_event.parts import TextPart

    log = SessionLog()
    plain = [TextPart(text="be brief")]
    cached = [TextPart(text="be brief", cache_control={"type": "ephemeral"})]
    log.update_header(header(system="be brief", system_parts=plain))
    log.update_header(header(system="be brief", system_parts=plain))
    log.update_header(header(system="be brief", system_parts=cached))
    assert [h.system_parts for h in headers_in(log)] == [plain, cached]


def test_explicit_settings_override_adapter_defaults() -> None:
    log = SessionLog()
    log.update_header(header())
    effective = log.current_header()
    assert effective is not None
    assert effective.sampling == {"temperature": 1.0, "max_tokens": 1024}
    assert effective.adapter_defaults == {"temperature": 1.0, "max_tokens": 4096}
    # the logged event keeps defaults and explicit settings apart
    assert headers_in(log)[0].sampling == {"max_tokens": 1024}


def test_adapter_defaults_are_re_evaluated_each_turn() -> None:
    log = SessionLog()
    log.update_header(header())
    # an overridden default changing changes nothing the model sees: no new epoch
    assert log.update_header(header(adapter_defaults={"temperature": 1.0, "max_tokens": 8})) is None
    # a default that is in force changing is a new epoch
    logged = log.update_header(header(adapter_defaults={"temperature": 0.5}))
    assert logged is not None and logged.seq == 1
    current = log.current_header()
    assert current is not None and current.sampling == {"temperature": 0.5, "max_tokens": 1024}
    # making a default explicit with the same value is a change of settings (it now wins)
    assert log.update_header(header(sampling={"max_tokens": 1024, "temperature": 0.5},
                                    adapter_defaults={"temperature": 0.5})) is not None  # fmt: skip


def test_current_header_after_reload(durable_url: str) -> None:
    log = SessionLog(open_store(durable_url), "s")
    log.update_header(header())
    log.checkpoint()
    reloaded = SessionLog.open(open_store(durable_url), "s", live=True)
    assert reloaded.current_header() == log.current_header()
    assert reloaded.update_header(header()) is None


# ---------------------------------------------------------------- compression


def test_compress_writes_markers_and_replaces_the_range() -> None:
    log = SessionLog()
    for turn in range(3):
        add_turn(log, turn, tools=1)
    surface = log.surface_seqs()
    start, end = surface[0], surface[3]
    before = log.next_seq
    summary = log.compress(start, end, "turn 0 asked and answered", tokens_before=900,
                           tokens_after=100, reason="context full")  # fmt: skip
    written = log.events(before)
    assert [type(e) for e in written] == [
        CompressionStartEvent,
        UserMessageEvent,
        CompressionSummaryEvent,
        CompressionEndEvent,
    ]
    start_event, message, summary_event, end_event = written
    assert isinstance(start_event, CompressionStartEvent)
    assert (start_event.start, start_event.end, start_event.reason) == (start, end, "context full")
    assert message == summary
    assert isinstance(summary_event, CompressionSummaryEvent)
    assert summary_event.message_seq == summary.seq
    assert summary_event.text == "turn 0 asked and answered"
    assert isinstance(end_event, CompressionEndEvent) and end_event.tokens_saved == 800
    assert log.surface_seqs() == [summary.seq, *surface[4:]]
    first = log.derive_messages()[0]
    assert first == UserMessage(
        seq=summary.seq, content=[TextPart(text="turn 0 asked and answered")]
    )
    assert log.generation == 1


def test_compress_with_a_bad_range_writes_nothing() -> None:
    log = SessionLog()
    add_turn(log, 0)
    before = log.next_seq
    with pytest.raises(SurfaceError):
        log.compress(0, 3, "x")  # seq 0 is turn/start, not on the surface
    assert log.next_seq == before


def test_prune_replaces_tool_results_and_records_what_it_saved() -> None:
    log = SessionLog()
    for turn in range(2):
        add_turn(log, turn, tools=2)
    results = [e for e in log.events() if isinstance(e, ToolResultEvent)]
    pruned = [results[0].seq, results[2].seq]
    before = log.next_seq
    replacements = log.prune(pruned, "[pruned]", tokens_saved=42)
    prune_event = log.get(before)
    assert isinstance(prune_event, CompressionPruneEvent)
    assert prune_event.pruned == pruned
    assert prune_event.tokens_saved == 42
    assert prune_event.replacement_seqs == [r.seq for r in replacements] == [before + 1, before + 2]
    assert [r.call_id for r in replacements] == [results[0].call_id, results[2].call_id]
    tools = [m for m in log.derive_messages() if isinstance(m, ToolMessage)]
    assert [(m.call_id, m.content) for m in tools] == [
        (results[0].call_id, [TextPart(text="[pruned]")]),
        (results[1].call_id, results[1].content),
        (results[2].call_id, [TextPart(text="[pruned]")]),
        (results[3].call_id, results[3].content),
    ]
    assert log.generation == 2
    # pruning something already pruned, or not a tool result, is refused
    with pytest.raises(SurfaceError, match="not on the surface"):
        log.prune([results[0].seq])
    with pytest.raises(SurfaceError, match="not a tool/result"):
        log.prune([0])


def test_prune_with_no_seq_or_one_seq_twice_writes_nothing() -> None:
    log = SessionLog()
    add_turn(log, 0, tools=1)
    (result,) = [e for e in log.events() if isinstance(e, ToolResultEvent)]
    before = log.next_seq
    for seqs in ([], [result.seq, result.seq]):
        with pytest.raises(SurfaceError):
            log.prune(seqs)
    assert log.next_seq == before and log.generation == 0
