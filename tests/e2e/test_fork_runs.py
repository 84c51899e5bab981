"""A forked session run on (the real CLIs, offline): the child is handed over to a native
session of its own, so its model sees its history only, never the parent's turns after
the fork point, and the parent's never sees the child's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e._support import runner
from universal_event.events import RuntimeSwitchEvent
from universal_event.fake_models import FakeModelServer, Reply
from universal_event.handoff import continue_session
from universal_event.log import SessionLog
from universal_event.stores import open_store


def _tags(body: dict[str, Any]) -> list[str]:
    """The PROMPT-/ANSWER- marks a request's history holds, in order."""
    return re.findall(r"(?:PROMPT|ANSWER)-[A-Z0-9]+", str(body.get("messages") or body["input"]))


@pytest.mark.parametrize("runtime", ["claude-code", "codex"])
def test_a_forked_session_runs_on_a_native_session_of_its_own(runtime: str, tmp_path: Path) -> None:
    answers = ["ONE", "TWO", "CHILD1", "THREE", "CHILD2"]
    store = open_store(f"sqlite:///{tmp_path / 's.db'}")
    with FakeModelServer([Reply(text=f"ANSWER-{a}") for a in answers]) as server:
        run = runner(runtime, server.url, tmp_path)
        parent = SessionLog(store, "parent")
        for prompt in ("PROMPT-ONE", "PROMPT-TWO"):
            assert continue_session(parent, run, prompt).status == "completed"
        first_turn = parent.turn_boundaries()[0][0]
        child = parent.fork("child", after_turn=first_turn)
        assert continue_session(child, run, "PROMPT-CHILD1").status == "completed"
        child_sent = server.model_requests()[-1].body
        assert continue_session(parent, run, "PROMPT-THREE").status == "completed"
        parent_sent = server.model_requests()[-1].body
        assert continue_session(child, run, "PROMPT-CHILD2").status == "completed"
        child_again = server.model_requests()[-1].body
    assert _tags(child_sent) == ["PROMPT-ONE", "ANSWER-ONE", "PROMPT-CHILD1"]
    assert _tags(parent_sent) == [
        "PROMPT-ONE", "ANSWER-ONE", "PROMPT-TWO", "ANSWER-TWO", "PROMPT-THREE",
    ]  # fmt: skip
    assert _tags(child_again) == [
        "PROMPT-ONE", "ANSWER-ONE", "PROMPT-CHILD1", "ANSWER-CHILD1", "PROMPT-CHILD2",
    ]  # fmt: skip
    # one hand-over, at the child's first run; its second resumed what that wrote
    switches = [e for e in child.events() if isinstance(e, RuntimeSwitchEvent)]
    assert [(s.from_runtime, s.to_runtime, s.reason) for s in switches] == [
        (runtime, runtime, "fork")
    ]
    assert not [e for e in parent.events() if isinstance(e, RuntimeSwitchEvent)]
    parent.close()
    child.close()
    store.close()
