"""What the log refuses, and that a refusal logs nothing: a compression or a pruning
with a part that does not belong, a float no JSON holds, a replace bound of the wrong
type."""

from __future__ import annotations

import math

import pytest

from universal_event import (
    AssistantMessageEvent,
    DecodeError,
    RequestHeaderEvent,
    SessionLog,
    Surface,
    SurfaceError,
    TextPart,
    ToolCallEvent,
    ToolCallPart,
    ToolResultEvent,
    TurnEndEvent,
    Usage,
    UsageEvent,
    UserMessageEvent,
)
from universal_event.parts import ThinkingPart
from universal_event.stores import open_store


def _session() -> SessionLog:
    """A question, a tool call and its result (seqs 0, 1, 2)."""
    log = SessionLog()
    log.append(UserMessageEvent(content=[TextPart(text="q")]))
    log.append(AssistantMessageEvent(content=[ToolCallPart(id="c1", name="f")]))
    log.append(ToolResultEvent(call_id="c1", content=[TextPart(text="big output")]))
    return log


# ---------------------------------------------------------------- compress and prune


def test_a_compression_with_a_part_that_is_no_user_part_logs_nothing() -> None:
    """Before, the compression/start was logged and then the summary refused."""
    log = _session()
    with pytest.raises(DecodeError, match="summary part 1 is a ThinkingPart") as info:
        wrong = ThinkingPart(text="not a user part")
        log.compress(0, 1, [TextPart(text="ok"), wrong])  # type: ignore[list-item]
    assert info.value.path == "$.content[1]"
    assert len(log) == 3 and log.surface_seqs() == [0, 1, 2]


def test_a_compression_that_cannot_be_stored_logs_nothing() -> None:
    """Whichever of its events would be refused (a token count of the wrong type, a
    summary text no JSON holds), none is logged."""
    log = _session()
    with pytest.raises(DecodeError, match="compression/summary event cannot be stored"):
        log.compress(0, 1, "summary", tokens_before=10, tokens_after="5")  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match="user/message event cannot be stored"):
        log.compress(0, 1, "caf\udce9")
    assert len(log) == 3
    summary = log.compress(0, 1, "summary", tokens_before=10, tokens_after=5)
    assert log.surface_seqs() == [summary.seq, 2]


def test_a_pruning_with_a_part_that_is_no_result_part_logs_nothing() -> None:
    """Before, the compression/prune was logged, naming as replacements the seqs the
    next, unrelated events took."""
    log = _session()
    with pytest.raises(DecodeError, match="replacement part 0 is a ToolCallPart") as info:
        log.prune([2], replacement=[ToolCallPart(id="x", name="y")])  # type: ignore[list-item]
    assert info.value.path == "$.content[0]"
    with pytest.raises(DecodeError, match="tool/result event cannot be stored"):
        log.prune([2], replacement=[TextPart(text="caf\udce9")])
    assert len(log) == 3
    (replacement,) = log.prune([2])
    assert log.surface_seqs() == [0, 1, replacement.seq]


# ---------------------------------------------------------------- non-finite floats


@pytest.mark.parametrize(
    ("event", "path"),
    [
        (UsageEvent(usage=Usage(input_tokens=1), cost_usd=math.nan), "$.cost_usd"),
        (TurnEndEvent(turn_id="t", cost_usd=math.inf), "$.cost_usd"),
        (UserMessageEvent(ts=-math.inf, content=[TextPart(text="x")]), "$.ts"),
        (RequestHeaderEvent(sampling={"temperature": math.nan}), "$.sampling.temperature"),
        (
            ToolCallEvent(call_id="c", name="f", arguments={"xs": [1.5, None, math.inf]}),
            "$.arguments.xs[2]",
        ),
        (
            AssistantMessageEvent(
                content=[TextPart(text="a"), ToolCallPart(id="c", name="f", arguments=math.nan)]
            ),
            "$.content[1].arguments",
        ),
    ],
)
def test_a_float_no_json_holds_is_refused_naming_the_field(
    durable_url: str, event: UsageEvent, path: str
) -> None:
    """NaN and infinity were stored as null: read back as None (a cost lost, a reload
    disagreeing with the live log) or not at all. Refused at append, nothing taken."""
    log = SessionLog(open_store(durable_url), "s")
    with pytest.raises(DecodeError, match="is not a finite number") as info:
        log.append(event)
    assert info.value.path == path
    assert len(log) == 0


def test_nulls_and_finite_floats_are_still_taken(durable_url: str) -> None:
    log = SessionLog(open_store(durable_url), "s")
    logged = [
        log.append(ToolCallEvent(call_id="c", name="f", arguments={"a": None, "b": [0.5, None]})),
        log.append(UsageEvent(usage=Usage(input_tokens=1), cost_usd=1e308)),
        log.append(UserMessageEvent(content=[TextPart(text="null")])),
    ]
    log.checkpoint()
    assert list(open_store(durable_url).read("s")) == logged


# ---------------------------------------------------------------- replace bounds


def test_a_replace_bound_of_the_wrong_type_is_named_as_such() -> None:
    """Before: "replace start seq 0 is not on the surface", hiding the string."""
    log = _session()
    for surface, problem in (
        (Surface(op="replace", start="0", end="0"), "start must be an int seq, got str '0'"),  # type: ignore[arg-type]
        (Surface(op="replace", start=0, end=1.0), "end must be an int seq, got float 1.0"),  # type: ignore[arg-type]
        (Surface(op="replace", start=True, end=0), "start must be an int seq, got bool True"),
    ):
        with pytest.raises(SurfaceError, match=problem):
            log.append(UserMessageEvent(content=[TextPart(text="x")]), surface=surface)
    with pytest.raises(SurfaceError, match="start must be an int seq, got str"):
        log.compress("0", 1, "summary")  # type: ignore[arg-type]
    assert len(log) == 3


def test_a_range_given_to_an_intent_that_takes_none_is_refused() -> None:
    """``hidden`` or ``append`` with a range was taken silently (a replace meant)."""
    log = _session()
    for op in ("hidden", "append"):
        with pytest.raises(SurfaceError, match=f"'{op}' takes no range"):
            log.append(
                UserMessageEvent(content=[TextPart(text="x")]),
                surface=Surface(op=op, start=0, end=0),  # type: ignore[arg-type]
            )
    assert len(log) == 3
    log.append(UserMessageEvent(content=[TextPart(text="x")]), surface=Surface(op="hidden"))
    assert len(log) == 4


def test_replay_refuses_a_speed_that_is_not_a_number() -> None:
    from universal_event.replay import replay

    for speed in (math.nan, 0.0, -1.0):
        with pytest.raises(ValueError, match="replay speed must be positive"):
            list(replay([], paced=True, speed=speed))
