from __future__ import annotations

import pytest

import universal_event as ue


def test_round_trip_user_message() -> None:
    event = ue.UserMessageEvent(content=[ue.TextPart(text="hi")])
    assert ue.decode(ue.encode(event)) == event


def test_wrong_type_names_path() -> None:
    with pytest.raises(ue.DecodeError) as info:
        ue.decode(b'{"type":"user/message","content":[{"type":"text","text":1}]}')
    assert info.value.path == "$.content[0].text"
