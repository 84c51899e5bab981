"""Sessions a newer version wrote: a surface event holding a part type this version does
not know is read as ``native/unknown`` (see the codec) and keeps its place on the
surface, so the replaces that name it still apply and the session still opens."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import msgspec
import pytest

from universal_event import (
    AssistantMessage,
    AssistantMessageEvent,
    NativeUnknownEvent,
    SessionLog,
    SurfaceError,
    TextPart,
    ToolCallPart,
    ToolResultEvent,
    UserMessage,
    UserMessageEvent,
    decode,
    derive_messages,
)
from universal_event.stores import Store, open_store

AUDIO = {"type": "zz_audio", "data": "AAAA"}
"""A part type from a newer version."""


def _rewrite(url: str, session_id: str, seq: int, change: Any) -> None:
    """Rewrite the stored event at ``seq`` as a newer writer would have written it:
    ``change`` edits its JSON object in place."""
    if url.startswith("jsonl://"):
        path = f"{url.removeprefix('jsonl://')}/{session_id}.jsonl"
        with open(path, "rb") as handle:
            lines = handle.read().splitlines(keepends=True)
        document = json.loads(lines[seq + 1])  # line 0 is the session header
        change(document)
        lines[seq + 1] = json.dumps(document).encode() + b"\n"
        with open(path, "wb") as handle:
            handle.write(b"".join(lines))
        return
    with sqlite3.connect(url.removeprefix("sqlite://")) as connection:
        where = "WHERE session_id=? AND seq=?"
        (payload,) = connection.execute(
            f"SELECT payload FROM events {where}", (session_id, seq)
        ).fetchone()
        document = json.loads(payload)
        change(document)
        connection.execute(
            f"UPDATE events SET payload=? {where}", (json.dumps(document), session_id, seq)
        )
    connection.close()


def _add_part(part: dict[str, Any]) -> Any:
    return lambda document: document["content"].append(part)


def _only_unknown_parts(document: dict[str, Any]) -> None:
    document["content"] = [AUDIO]


def _encoded(messages: object) -> bytes:
    return msgspec.json.encode(messages)


def _reader(url: str) -> tuple[Store, SessionLog]:
    """A fresh store handle (nothing cached from before the rewrite) and the session."""
    store = open_store(url)
    return store, SessionLog.open(store, "s")


def _assert_derives_agree(store: Store, log: SessionLog) -> bytes:
    """The log's derive equals a from-scratch derive of the stored events, byte for byte."""
    derived = _encoded(log.derive_messages())
    assert derived == _encoded(derive_messages(list(store.read("s"))))
    return derived


def test_a_replace_naming_a_recovered_event_still_applies(durable_url: str) -> None:
    """The repro: seq 0 holds a newer part and a compression replaced 0..1. Before, the
    replace found seq 0 off the surface and the session no longer opened."""
    writer = SessionLog(open_store(durable_url), "s")
    writer.append(UserMessageEvent(content=[TextPart(text="hi")]))
    writer.append(AssistantMessageEvent(content=[TextPart(text="hello")]))
    summary = writer.compress(0, 1, "summary")
    writer.checkpoint()
    writer.close()
    _rewrite(durable_url, "s", 0, _add_part(AUDIO))

    store, log = _reader(durable_url)
    assert isinstance(log.get(0), NativeUnknownEvent)
    assert log.surface_seqs() == [summary.seq]
    assert [m.seq for m in log.derive_messages()] == [summary.seq]
    _assert_derives_agree(store, log)


def test_a_recovered_event_shows_its_known_parts_and_keeps_its_seq(durable_url: str) -> None:
    """The parts this version knows are what it renders: the tool call keeps its result
    paired, the text its context."""
    writer = SessionLog(open_store(durable_url), "s")
    writer.append(UserMessageEvent(content=[TextPart(text="run it")]))
    call = ToolCallPart(id="c1", name="bash", arguments={"cmd": "ls"})
    writer.append(AssistantMessageEvent(content=[TextPart(text="running"), call]))
    writer.append(ToolResultEvent(call_id="c1", content=[TextPart(text="a.py")]))
    writer.checkpoint()
    writer.close()
    _rewrite(durable_url, "s", 1, _add_part(AUDIO))
    _rewrite(durable_url, "s", 2, _add_part(AUDIO))

    store, log = _reader(durable_url)
    messages = log.derive_messages()
    assert [m.seq for m in messages] == [0, 1, 2]
    assistant = messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content == [TextPart(text="running"), call]
    assert messages[2].content == [TextPart(text="a.py")]
    _assert_derives_agree(store, log)


def test_a_recovered_replacement_still_replaces_its_range(durable_url: str) -> None:
    """A summary written with a newer part is itself a replace: applied from its payload,
    the range it replaced stays gone and a later compression over it applies."""
    writer = SessionLog(open_store(durable_url), "s")
    writer.append(UserMessageEvent(content=[TextPart(text="a")]))
    writer.append(AssistantMessageEvent(content=[TextPart(text="b")]))
    summary = writer.compress(0, 1, "first summary")
    later = writer.append(UserMessageEvent(content=[TextPart(text="c")]))
    again = writer.compress(summary.seq, later.seq, "second summary")
    writer.checkpoint()
    writer.close()
    _rewrite(durable_url, "s", summary.seq, _add_part(AUDIO))

    store, log = _reader(durable_url)
    assert isinstance(log.get(summary.seq), NativeUnknownEvent)
    assert log.surface_seqs() == [again.seq]
    _assert_derives_agree(store, log)


def test_a_recovered_event_with_nothing_to_render_keeps_its_place(durable_url: str) -> None:
    """Only unknown parts: no message, but a replace ending at its seq still applies."""
    writer = SessionLog(open_store(durable_url), "s")
    writer.append(UserMessageEvent(content=[TextPart(text="a")]))
    writer.append(UserMessageEvent(content=[TextPart(text="b")]))
    writer.append(UserMessageEvent(content=[TextPart(text="c")]))
    writer.checkpoint()
    writer.close()
    _rewrite(durable_url, "s", 1, _only_unknown_parts)

    store, log = _reader(durable_url)
    assert log.surface_seqs() == [0, 1, 2]
    assert [m.seq for m in log.derive_messages()] == [0, 2]
    _assert_derives_agree(store, log)
    live = SessionLog.open(store, "s", live=True)
    summary = live.compress(0, 1, "summary")
    assert [m.seq for m in live.derive_messages()] == [summary.seq, 2]
    live.checkpoint()
    live.close()
    store, reloaded = _reader(durable_url)
    assert _assert_derives_agree(store, reloaded) == _encoded(live.derive_messages())


def test_an_older_reader_goes_on_with_the_session_live(durable_url: str) -> None:
    """Live, reload and from-scratch derives stay equal while an older reader compresses
    over the recovered event and appends after it."""
    writer = SessionLog(open_store(durable_url), "s")
    for text in ("a", "b", "c"):
        writer.append(UserMessageEvent(content=[TextPart(text=text)]))
    writer.checkpoint()
    writer.close()
    _rewrite(durable_url, "s", 0, _add_part(AUDIO))

    live = SessionLog.open(open_store(durable_url), "s", live=True)
    live.compress(0, 1, "summary")
    live.append(UserMessageEvent(content=[TextPart(text="d")]))
    live.checkpoint()
    live.close()
    store, reloaded = _reader(durable_url)
    assert _assert_derives_agree(store, reloaded) == _encoded(live.derive_messages())


def test_hidden_and_bad_intents_of_recovered_events(durable_url: str) -> None:
    """A hidden recovered event stays off the surface; one whose intent is no intent is
    a SurfaceError naming it, as a known event's bad intent is."""
    writer = SessionLog(open_store(durable_url), "s")
    writer.append(UserMessageEvent(content=[TextPart(text="a")]))
    writer.append(UserMessageEvent(content=[TextPart(text="b")]))
    writer.checkpoint()
    writer.close()

    def hide(document: dict[str, Any]) -> None:
        document["content"].append(AUDIO)
        document["surface"] = {"op": "hidden"}

    _rewrite(durable_url, "s", 1, hide)
    store, log = _reader(durable_url)
    assert log.surface_seqs() == [0]
    _assert_derives_agree(store, log)

    def break_intent(document: dict[str, Any]) -> None:
        document["surface"] = {"op": "replace", "start": "zero"}

    _rewrite(durable_url, "s", 1, break_intent)
    with pytest.raises(SurfaceError, match=r"event seq 1 \(user/message kept as native/unknown\)"):
        _reader(durable_url)


def test_a_recovered_event_appended_again_derives_as_read() -> None:
    """An import of a newer session's events (read as native/unknown) into a fresh log
    derives what a from-scratch derive of them does."""
    source = SessionLog()
    source.append(UserMessageEvent(content=[TextPart(text="a")]))
    source.append(AssistantMessageEvent(content=[TextPart(text="b")]))
    source.compress(0, 1, "summary")
    lines = [msgspec.json.decode(msgspec.json.encode(e)) for e in source.events()]
    lines[0]["content"].append(AUDIO)
    read = [decode(json.dumps(line)) for line in lines]
    assert isinstance(read[0], NativeUnknownEvent)
    copy = SessionLog()
    copy.extend(read)
    assert _encoded(copy.derive_messages()) == _encoded(derive_messages(read))
    assert [type(m) for m in copy.derive_messages()] == [UserMessage]
